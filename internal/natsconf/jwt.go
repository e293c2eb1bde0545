package natsconf

import (
	"crypto/sha256"
	"fmt"
	"slices"
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

// UserCreds returns the .creds file (user JWT and seed) of user with the
// permissions UserPermissions gives it, signed by its account: the system
// account's for the system user, OPERATOR's, the fan-out account's for the
// links, a namespace's for its services, else CUECAST's.
func (k *Keys) UserCreds(user string) ([]byte, error) {
	signer, issuerAccount, err := k.userSigner(user)
	if err != nil {
		return nil, err
	}
	p, _ := UserPermissions(user)
	return signUser(signer, issuerAccount, user, p)
}

// userSigner is the key that signs user's JWT and, when that is a signing
// key rather than the account's own, the account it signs for.
func (k *Keys) userSigner(user string) (signer nkeys.KeyPair, issuerAccount string, err error) {
	switch ns, svc := strings.CutPrefix(user, "svc-"); {
	case user == SystemUser:
		return k.System, "", nil
	case user == OperatorUser:
		signer, err = k.OperatorAccountKey()
	case strings.HasPrefix(user, summarizerUserPrefix):
		// A region's summarizer logs in to its region's mirrors' account
		// (the fan-out account's key), beside the reports, but with a
		// signing key of its region's that only its region's servers
		// list (operatorMode): the fan-out account's own key would make
		// it a user at every region's server, and at the hub's.
		if signer, err = k.RegionSigningKey(strings.TrimPrefix(user, summarizerUserPrefix)); err != nil {
			return nil, "", err
		}
		fkp, err := k.FanoutAccountKey()
		if err != nil {
			return nil, "", err
		}
		issuerAccount, err = accountPub(fkp, FanoutAccount)
		return signer, issuerAccount, err
	case user == LeafUser, strings.HasPrefix(user, regionUserPrefix):
		// The links' users: the hub's fan-out account, a region's mirrors'.
		signer, err = k.FanoutAccountKey()
	case svc:
		signer, err = k.ServiceAccountKey(ns)
	default:
		signer = k.Account
	}
	return signer, "", err
}

// CredsCurrent reports whether creds, a .creds file of user written
// earlier, is what UserCreds would write now: signed by the same account,
// for the same user name, with the same permissions. A file from an older
// layout is not (the links' user was CUECAST's before it moved to the
// fan-out account; the operator's was too), and keeping it would keep the
// older, broader rights: such a file must be written again.
func (k *Keys) CredsCurrent(user string, creds []byte) (bool, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return false, fmt.Errorf("read the JWT in %s.creds: %w", user, err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return false, fmt.Errorf("decode the JWT in %s.creds: %w", user, err)
	}
	signer, issuerAccount, err := k.userSigner(user)
	if err != nil {
		return false, err
	}
	pub, err := signer.PublicKey()
	if err != nil {
		return false, fmt.Errorf("account key of %s: %w", user, err)
	}
	if uc.Issuer != pub || uc.IssuerAccount != issuerAccount || uc.Name != user {
		return false, nil
	}
	p, _ := UserPermissions(user)
	// As sets: the JWT's lists hold each subject once (StringList.Add).
	same := func(have jwt.StringList, want []string) bool {
		set := make(map[string]bool, len(want))
		for _, w := range want {
			set[w] = true
		}
		if len(have) != len(set) {
			return false
		}
		for _, h := range have {
			if !set[h] {
				return false
			}
		}
		return true
	}
	up := uc.Permissions
	return same(up.Pub.Allow, p.Publish) && same(up.Pub.Deny, p.PublishDeny) &&
		same(up.Sub.Allow, p.Subscribe) && same(up.Sub.Deny, p.SubscribeDeny) &&
		same(uc.AllowedConnectionTypes, p.ConnectionTypes), nil
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
	return SignUserCreds(akp, InstanceUser(ns, instance), InstancePermissions(ns, instance))
}

// SignUserCreds returns the .creds file of a new user signed by account
// with permissions p. UserCreds and InstanceCreds choose the account; a
// test signs with another to make a file of an older layout.
func SignUserCreds(account nkeys.KeyPair, user string, p Permissions) ([]byte, error) {
	return signUser(account, "", user, p)
}

// signUser is SignUserCreds with a signing key of issuerAccount's when
// issuerAccount is not empty.
func signUser(signer nkeys.KeyPair, issuerAccount, user string, p Permissions) ([]byte, error) {
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
	uc.Permissions.Pub.Deny.Add(p.PublishDeny...)
	uc.Permissions.Sub.Allow.Add(p.Subscribe...)
	uc.Permissions.Sub.Deny.Add(p.SubscribeDeny...)
	uc.AllowedConnectionTypes.Add(p.ConnectionTypes...)
	uc.IssuerAccount = issuerAccount
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

// ServiceAccountKey is the key of namespace ns's service account
// (ServiceAccount). It is derived from the CUECAST account's seed, so the
// three seeds stay the only secrets of operator mode and every level agrees
// on the namespace accounts without another file.
func (k *Keys) ServiceAccountKey(ns string) (nkeys.KeyPair, error) {
	return k.deriveAccountKey("cuecast service account\x00"+ns+"\x00", "account key of "+ns)
}

// OperatorAccountKey is the key of the operator's account
// (OperatorAccount), derived from the CUECAST account's seed as the
// namespaces' are (ServiceAccountKey).
func (k *Keys) OperatorAccountKey() (nkeys.KeyPair, error) {
	return k.deriveAccountKey("cuecast operator account\x00", "the operator's account key")
}

// FanoutAccountKey is the key of the hub's fan-out account
// (FanoutAccount), which the leafnode links' user (LeafUser) belongs to,
// derived from the CUECAST account's seed as the namespaces' are
// (ServiceAccountKey). Below the hub, the account holding a level's
// mirrors has this key too (named CUECAST there), so that the same
// leaf.creds binds a region's links to its mirrors and a link into the hub
// to the fan-out account, never to the hub's CUECAST.
func (k *Keys) FanoutAccountKey() (nkeys.KeyPair, error) {
	return k.deriveAccountKey("cuecast fanout account\x00", "the fan-out account key")
}

// RegionSigningKey is the signing key of region's summarizer's user
// (SummarizerUser), derived from the CUECAST account's seed as the
// accounts' keys are (ServiceAccountKey). Only the configurations of the
// region's own servers list it among the signing keys of the account
// holding their mirrors, so the user logs in nowhere else.
func (k *Keys) RegionSigningKey(region string) (nkeys.KeyPair, error) {
	return k.deriveAccountKey("cuecast region signing key\x00"+region+"\x00", "the signing key of region "+region)
}

// deriveAccountKey is the account key whose seed is the SHA-256 of label
// followed by the CUECAST account's seed; what names it in an error.
func (k *Keys) deriveAccountKey(label, what string) (nkeys.KeyPair, error) {
	seed, err := k.Account.Seed()
	if err != nil {
		return nil, fmt.Errorf("read account seed: %w", err)
	}
	raw := sha256.Sum256(append([]byte(label), seed...))
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteAccount, raw[:])
	if err != nil {
		return nil, fmt.Errorf("derive %s: %w", what, err)
	}
	return kp, nil
}

// LocalAdminCreds returns the .creds file of a user without permissions in
// the account holding the mirrors of a level below the hub: what whoever
// administers such a server can make for itself anyway (its own
// configuration). For tests of a compromised host and for local tooling;
// the hub does not know this account by that name.
func (k *Keys) LocalAdminCreds() ([]byte, error) {
	fkp, err := k.FanoutAccountKey()
	if err != nil {
		return nil, err
	}
	return SignUserCreds(fkp, "local-admin", Permissions{})
}

// exporter is an account that exports to others in operator mode.
type exporter struct {
	kp     nkeys.KeyPair
	pub    string
	claims *jwt.AccountClaims
}

// importInto exports im from ex (with claims nil, the export exists
// already: another account imports it too) to the account with public key
// pub alone, and imports it there (claims into) with an activation token
// ex signed.
func importInto(ex exporter, exportClaims, into *jwt.AccountClaims, pub, name string, im serviceImport) error {
	typ := jwt.Service
	if im.stream {
		typ = jwt.Stream
	}
	if exportClaims != nil {
		e := &jwt.Export{Name: name + " " + im.subject, Subject: jwt.Subject(im.subject), Type: typ, TokenReq: true}
		if im.streamed {
			e.ResponseType = jwt.ResponseTypeStream
		}
		exportClaims.Exports.Add(e)
	}
	act := jwt.NewActivationClaims(pub)
	act.ImportSubject = jwt.Subject(im.subject)
	act.ImportType = typ
	token, err := act.Encode(ex.kp)
	if err != nil {
		return fmt.Errorf("sign activation of %s for %s: %w", im.subject, name, err)
	}
	imp := &jwt.Import{Name: im.subject, Subject: jwt.Subject(im.subject), Account: ex.pub, Token: token, Type: typ}
	if im.to != "" {
		imp.LocalSubject = jwt.RenamingSubject(im.to)
	}
	into.Imports.Add(imp)
	return nil
}

// operatorMode are the JWTs an operator-mode server preloads.
type operatorMode struct {
	operatorJWT string
	// mainPub is the account holding the level's streams or mirrors,
	// which the leafnode remote binds: CUECAST's key at the hub (and
	// standalone), FanoutAccountKey's below it.
	mainPub   string
	systemPub string
	accounts  map[string]string // public key ▶ account JWT
	// preload lists the accounts' public keys in the order written.
	preload []string
}

func accountPub(kp nkeys.KeyPair, name string) (string, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("read the %s account key: %w", name, err)
	}
	return pub, nil
}

func (k *Keys) operatorMode(namespaces []string, level Level, region string) (operatorMode, error) {
	var m operatorMode
	opub, err := k.Operator.PublicKey()
	if err != nil {
		return m, fmt.Errorf("read operator key: %w", err)
	}
	if m.systemPub, err = accountPub(k.System, SystemAccount); err != nil {
		return m, err
	}
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "cuecast"
	oc.SystemAccount = m.systemPub
	if m.operatorJWT, err = oc.Encode(k.Operator); err != nil {
		return m, fmt.Errorf("sign operator: %w", err)
	}
	m.accounts = map[string]string{}
	fkp, err := k.FanoutAccountKey()
	if err != nil {
		return m, err
	}
	fanoutPub, err := accountPub(fkp, FanoutAccount)
	if err != nil {
		return m, err
	}
	cuecastPub, err := accountPub(k.Account, Account)
	if err != nil {
		return m, err
	}
	main := exporter{kp: k.Account, pub: cuecastPub}
	if level == Leaf || level == Node {
		main = exporter{kp: fkp, pub: fanoutPub}
	}
	m.mainPub = main.pub
	jsLimits := jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, DiskMaxStreamBytes: -1}
	ac := jwt.NewAccountClaims(main.pub)
	ac.Name = Account
	ac.Limits.JetStreamLimits = jsLimits
	if region != "" {
		rkp, err := k.RegionSigningKey(region)
		if err != nil {
			return m, err
		}
		rpub, err := rkp.PublicKey()
		if err != nil {
			return m, fmt.Errorf("read the signing key of region %s: %w", region, err)
		}
		ac.SigningKeys.Add(rpub)
	}
	main.claims = ac
	m.preload = append(m.preload, main.pub, m.systemPub)
	for _, ns := range namespaces {
		skp, err := k.ServiceAccountKey(ns)
		if err != nil {
			return m, err
		}
		spub, err := accountPub(skp, ServiceAccount(ns))
		if err != nil {
			return m, err
		}
		sc := jwt.NewAccountClaims(spub)
		sc.Name = ServiceAccount(ns)
		for _, im := range serviceImports(ns) {
			// Exported to this account alone: the import carries an
			// activation token the exporting account signed for it.
			if err := importInto(main, ac, sc, spub, ns, im); err != nil {
				return m, err
			}
		}
		if m.accounts[spub], err = sc.Encode(k.Operator); err != nil {
			return m, fmt.Errorf("sign account of %s: %w", ns, err)
		}
		m.preload = append(m.preload, spub)
	}
	okp, err := k.OperatorAccountKey()
	if err != nil {
		return m, err
	}
	opPub, err := accountPub(okp, OperatorAccount)
	if err != nil {
		return m, err
	}
	oac := jwt.NewAccountClaims(opPub)
	oac.Name = OperatorAccount
	for _, im := range operatorImports() {
		if im.subject == "ccr.>" {
			// An account's stream exports may not overlap, and each
			// namespace's account imports its own updates: the operator
			// imports those exports, one per namespace of the tree.
			for _, ns := range namespaces {
				if err := importInto(main, nil, oac, opPub, OperatorAccount, serviceImport{subject: "ccr." + ns + ".>", stream: true}); err != nil {
					return m, err
				}
			}
			continue
		}
		if err := importInto(main, ac, oac, opPub, OperatorAccount, im); err != nil {
			return m, err
		}
	}
	if level == Hub {
		// The fan-out account the links are bound to (natsconf.go,
		// Generate): its mirror's imports from CUECAST, and what it
		// exports to CUECAST and, for the reports, to the operator.
		fc := jwt.NewAccountClaims(fanoutPub)
		fc.Name = FanoutAccount
		fc.Limits.JetStreamLimits = jsLimits
		fanout := exporter{kp: fkp, pub: fanoutPub, claims: fc}
		for _, im := range fanoutImports() {
			if im.subject == "ccs.>" {
				// An account's service exports may not overlap either:
				// the reports of each namespace of the tree, through
				// the exports its services import.
				for _, ns := range namespaces {
					if err := importInto(main, nil, fc, fanoutPub, FanoutAccount, serviceImport{subject: "ccs." + ns + ".>"}); err != nil {
						return m, err
					}
				}
				continue
			}
			if err := importInto(main, ac, fc, fanoutPub, FanoutAccount, im); err != nil {
				return m, err
			}
		}
		for _, im := range fanoutExports() {
			if err := importInto(fanout, fc, ac, main.pub, Account, im); err != nil {
				return m, err
			}
		}
		for _, im := range operatorFanout() {
			claims := fc
			if slices.ContainsFunc(fanoutExports(), func(e serviceImport) bool { return e.subject == im.subject }) {
				claims = nil // exported to CUECAST already (drill-down requests)
			}
			if err := importInto(fanout, claims, oac, opPub, OperatorAccount, im); err != nil {
				return m, err
			}
		}
		if m.accounts[fanoutPub], err = fc.Encode(k.Operator); err != nil {
			return m, fmt.Errorf("sign the fan-out account: %w", err)
		}
		m.preload = append(m.preload, fanoutPub)
	}
	if m.accounts[opPub], err = oac.Encode(k.Operator); err != nil {
		return m, fmt.Errorf("sign the operator's account: %w", err)
	}
	m.preload = append(m.preload, opPub)
	if m.accounts[main.pub], err = ac.Encode(k.Operator); err != nil {
		return m, fmt.Errorf("sign account: %w", err)
	}
	sc := jwt.NewAccountClaims(m.systemPub)
	sc.Name = SystemAccount
	if m.accounts[m.systemPub], err = sc.Encode(k.Operator); err != nil {
		return m, fmt.Errorf("sign system account: %w", err)
	}
	return m, nil
}
