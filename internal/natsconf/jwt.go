package natsconf

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
)

// Keys are the nkeys of operator (JWT) mode: the operator signs the account
// JWTs, the CUECAST account signs the user JWTs in the .creds files. One set
// serves the whole tree.
type Keys struct {
	Operator nkeys.KeyPair
	Account  nkeys.KeyPair
	System   nkeys.KeyPair
}

// NewKeys creates a fresh operator, CUECAST account and system account.
func NewKeys() (*Keys, error) {
	op, err := nkeys.CreateOperator()
	if err != nil {
		return nil, fmt.Errorf("create operator key: %w", err)
	}
	acct, err := nkeys.CreateAccount()
	if err != nil {
		return nil, fmt.Errorf("create account key: %w", err)
	}
	sys, err := nkeys.CreateAccount()
	if err != nil {
		return nil, fmt.Errorf("create system account key: %w", err)
	}
	return &Keys{Operator: op, Account: acct, System: sys}, nil
}

// KeysFromSeeds reads the three seeds NewKeys created (see Keys.Seeds).
func KeysFromSeeds(operator, account, system []byte) (*Keys, error) {
	var k Keys
	for _, x := range []struct {
		seed []byte
		kp   *nkeys.KeyPair
		name string
	}{{operator, &k.Operator, "operator"}, {account, &k.Account, "account"}, {system, &k.System, "system account"}} {
		kp, err := nkeys.FromSeed(x.seed)
		if err != nil {
			return nil, fmt.Errorf("read %s seed: %w", x.name, err)
		}
		*x.kp = kp
	}
	return &k, nil
}

// Seeds returns the operator, account and system account seeds (secrets).
func (k *Keys) Seeds() (operator, account, system []byte, err error) {
	if operator, err = k.Operator.Seed(); err != nil {
		return nil, nil, nil, fmt.Errorf("read operator seed: %w", err)
	}
	if account, err = k.Account.Seed(); err != nil {
		return nil, nil, nil, fmt.Errorf("read account seed: %w", err)
	}
	if system, err = k.System.Seed(); err != nil {
		return nil, nil, nil, fmt.Errorf("read system account seed: %w", err)
	}
	return operator, account, system, nil
}

// UserCreds returns the .creds file (user JWT and seed) of user in the
// CUECAST account, with the permissions UserPermissions gives it; the
// system user is in the system account.
func (k *Keys) UserCreds(user string) ([]byte, error) {
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", user, err)
	}
	upub, err := ukp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", user, err)
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = user
	if p, ok := UserPermissions(user); ok {
		uc.Permissions.Pub.Allow.Add(p.Publish...)
		uc.Permissions.Pub.Deny.Add(p.PublishDeny...)
		uc.Permissions.Sub.Allow.Add(p.Subscribe...)
	}
	signer := k.Account
	if user == SystemUser {
		signer = k.System
	}
	if user == OperatorUser {
		if signer, err = k.OperatorAccountKey(); err != nil {
			return nil, err
		}
	}
	if ns, ok := strings.CutPrefix(user, "svc-"); ok {
		if signer, err = k.ServiceAccountKey(ns); err != nil {
			return nil, err
		}
	}
	token, err := uc.Encode(signer)
	if err != nil {
		return nil, fmt.Errorf("sign user %s: %w", user, err)
	}
	seed, err := ukp.Seed()
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", user, err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return nil, fmt.Errorf("format creds of %s: %w", user, err)
	}
	return creds, nil
}

// InstanceCreds returns the .creds file of one instance of namespace ns:
// a user of the namespace's account (ServiceAccount) with
// InstancePermissions, so its reports are bound to the instance it was
// issued for.
func (k *Keys) InstanceCreds(ns, instance string) ([]byte, error) {
	if !cuecast.ValidSegment(ns) || !ValidInstance(instance) {
		return nil, fmt.Errorf("instance creds: %w: namespace %q, instance %q", ErrInvalidSpec, ns, instance)
	}
	akp, err := k.ServiceAccountKey(ns)
	if err != nil {
		return nil, err
	}
	return userCreds(akp, InstanceUser(ns, instance), InstancePermissions(ns, instance))
}

// userCreds creates a user signed by account with permissions p.
func userCreds(account nkeys.KeyPair, user string, p Permissions) ([]byte, error) {
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", user, err)
	}
	upub, err := ukp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", user, err)
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = user
	uc.Permissions.Pub.Allow.Add(p.Publish...)
	uc.Permissions.Sub.Allow.Add(p.Subscribe...)
	token, err := uc.Encode(account)
	if err != nil {
		return nil, fmt.Errorf("sign user %s: %w", user, err)
	}
	seed, err := ukp.Seed()
	if err != nil {
		return nil, fmt.Errorf("create user %s: %w", user, err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return nil, fmt.Errorf("format creds of %s: %w", user, err)
	}
	return creds, nil
}

// ServiceAccountKey is the key of namespace ns's service account
// (ServiceAccount). It is derived from the CUECAST account's seed, so the
// three seeds stay the only secrets of operator mode and every level agrees
// on the namespace accounts without another file.
func (k *Keys) ServiceAccountKey(ns string) (nkeys.KeyPair, error) {
	seed, err := k.Account.Seed()
	if err != nil {
		return nil, fmt.Errorf("read account seed: %w", err)
	}
	raw := sha256.Sum256(append([]byte("cuecast service account\x00"+ns+"\x00"), seed...))
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteAccount, raw[:])
	if err != nil {
		return nil, fmt.Errorf("derive account key of %s: %w", ns, err)
	}
	return kp, nil
}

// OperatorAccountKey is the key of the operator's account
// (OperatorAccount), derived from the CUECAST account's seed as the
// namespaces' are (ServiceAccountKey).
func (k *Keys) OperatorAccountKey() (nkeys.KeyPair, error) {
	seed, err := k.Account.Seed()
	if err != nil {
		return nil, fmt.Errorf("read account seed: %w", err)
	}
	raw := sha256.Sum256(append([]byte("cuecast operator account\x00"), seed...))
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteAccount, raw[:])
	if err != nil {
		return nil, fmt.Errorf("derive the operator's account key: %w", err)
	}
	return kp, nil
}

// importInto exports im from the CUECAST account (claims ac, public key
// acctPub) to the account with public key pub alone, and imports it there
// (claims into) with an activation token the CUECAST account signed.
// With ac nil, the export exists already (another account imports it too).
func (k *Keys) importInto(ac, into *jwt.AccountClaims, acctPub, pub, name string, im serviceImport) error {
	typ := jwt.Service
	if im.stream {
		typ = jwt.Stream
	}
	if ac != nil {
		e := &jwt.Export{Name: name + " " + im.subject, Subject: jwt.Subject(im.subject), Type: typ, TokenReq: true}
		if im.streamed {
			e.ResponseType = jwt.ResponseTypeStream
		}
		ac.Exports.Add(e)
	}
	act := jwt.NewActivationClaims(pub)
	act.ImportSubject = jwt.Subject(im.subject)
	act.ImportType = typ
	token, err := act.Encode(k.Account)
	if err != nil {
		return fmt.Errorf("sign activation of %s for %s: %w", im.subject, name, err)
	}
	imp := &jwt.Import{Name: im.subject, Subject: jwt.Subject(im.subject), Account: acctPub, Token: token, Type: typ}
	if im.to != "" {
		imp.LocalSubject = jwt.RenamingSubject(im.to)
	}
	into.Imports.Add(imp)
	return nil
}

// operatorMode are the JWTs an operator-mode server preloads.
type operatorMode struct {
	operatorJWT string
	accountPub  string
	systemPub   string
	accounts    map[string]string // public key ▶ account JWT
	// serviceAccounts are the namespaces' accounts' public keys, in the
	// order of Spec.Namespaces, then the operator's account's.
	serviceAccounts []string
}

func (k *Keys) operatorMode(namespaces []string) (operatorMode, error) {
	var m operatorMode
	opub, err := k.Operator.PublicKey()
	if err != nil {
		return m, fmt.Errorf("read operator key: %w", err)
	}
	if m.accountPub, err = k.Account.PublicKey(); err != nil {
		return m, fmt.Errorf("read account key: %w", err)
	}
	if m.systemPub, err = k.System.PublicKey(); err != nil {
		return m, fmt.Errorf("read system account key: %w", err)
	}
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "cuecast"
	oc.SystemAccount = m.systemPub
	if m.operatorJWT, err = oc.Encode(k.Operator); err != nil {
		return m, fmt.Errorf("sign operator: %w", err)
	}
	m.accounts = map[string]string{}
	ac := jwt.NewAccountClaims(m.accountPub)
	ac.Name = Account
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, DiskMaxStreamBytes: -1}
	for _, ns := range namespaces {
		skp, err := k.ServiceAccountKey(ns)
		if err != nil {
			return m, err
		}
		spub, err := skp.PublicKey()
		if err != nil {
			return m, fmt.Errorf("read account key of %s: %w", ns, err)
		}
		sc := jwt.NewAccountClaims(spub)
		sc.Name = ServiceAccount(ns)
		for _, im := range serviceImports(ns) {
			// Exported to this account alone: the import carries an
			// activation token the CUECAST account signed for it.
			if err := k.importInto(ac, sc, m.accountPub, spub, ns, im); err != nil {
				return m, err
			}
		}
		sjwt, err := sc.Encode(k.Operator)
		if err != nil {
			return m, fmt.Errorf("sign account of %s: %w", ns, err)
		}
		m.accounts[spub] = sjwt
		m.serviceAccounts = append(m.serviceAccounts, spub)
	}
	okp, err := k.OperatorAccountKey()
	if err != nil {
		return m, err
	}
	opPub, err := okp.PublicKey()
	if err != nil {
		return m, fmt.Errorf("read the operator's account key: %w", err)
	}
	oac := jwt.NewAccountClaims(opPub)
	oac.Name = OperatorAccount
	for _, im := range operatorImports() {
		if im.subject == "ccr.>" {
			// An account's stream exports may not overlap, and each
			// namespace's account imports its own updates: the operator
			// imports those exports, one per namespace of the tree.
			for _, ns := range namespaces {
				if err := k.importInto(nil, oac, m.accountPub, opPub, OperatorAccount, serviceImport{subject: "ccr." + ns + ".>", stream: true}); err != nil {
					return m, err
				}
			}
			continue
		}
		if err := k.importInto(ac, oac, m.accountPub, opPub, OperatorAccount, im); err != nil {
			return m, err
		}
	}
	if m.accounts[opPub], err = oac.Encode(k.Operator); err != nil {
		return m, fmt.Errorf("sign the operator's account: %w", err)
	}
	m.serviceAccounts = append(m.serviceAccounts, opPub)
	acctJWT, err := ac.Encode(k.Operator)
	if err != nil {
		return m, fmt.Errorf("sign account: %w", err)
	}
	sc := jwt.NewAccountClaims(m.systemPub)
	sc.Name = SystemAccount
	sysJWT, err := sc.Encode(k.Operator)
	if err != nil {
		return m, fmt.Errorf("sign system account: %w", err)
	}
	m.accounts[m.accountPub], m.accounts[m.systemPub] = acctJWT, sysJWT
	return m, nil
}
