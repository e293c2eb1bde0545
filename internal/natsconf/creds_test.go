package natsconf_test

import (
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast/internal/natsconf"
)

// signedBy is user's .creds with permissions p signed by account, as an
// older layout (or a hand-made file) would have it.
func signedBy(t *testing.T, account nkeys.KeyPair, user string, p natsconf.Permissions) []byte {
	t.Helper()
	b, err := natsconf.SignUserCreds(account, user, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCredsCurrent: a .creds file is current only when UserCreds would
// write it the same way; one signed by the account of an older layout (the
// links' user in CUECAST, before the fan-out account) or with other
// permissions is not, so nats-config writes it again.
func TestCredsCurrent(t *testing.T) {
	k, err := natsconf.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	other, err := natsconf.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	leafPerms, _ := natsconf.UserPermissions(natsconf.LeafUser)
	opPerms, _ := natsconf.UserPermissions(natsconf.OperatorUser)
	fresh := func(user string) []byte {
		b, err := k.UserCreds(user)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	broader := leafPerms
	broader.Publish = append(append([]string(nil), leafPerms.Publish...), ">")
	for _, tc := range []struct {
		name, user string
		creds      []byte
		want       bool
	}{
		{"fresh leaf", natsconf.LeafUser, fresh(natsconf.LeafUser), true},
		{"fresh operator", natsconf.OperatorUser, fresh(natsconf.OperatorUser), true},
		{"fresh service", "svc-payments", fresh("svc-payments"), true},
		{"fresh distributor", natsconf.DistributorUser, fresh(natsconf.DistributorUser), true},
		{"leaf signed by CUECAST (before the fan-out account)", natsconf.LeafUser, signedBy(t, k.Account, natsconf.LeafUser, leafPerms), false},
		{"operator signed by CUECAST", natsconf.OperatorUser, signedBy(t, k.Account, natsconf.OperatorUser, opPerms), false},
		{"leaf with broader permissions", natsconf.LeafUser, func() []byte {
			kp, err := k.FanoutAccountKey()
			if err != nil {
				t.Fatal(err)
			}
			return signedBy(t, kp, natsconf.LeafUser, broader)
		}(), false},
		{"another namespace's service", "svc-payments", fresh("svc-search"), false},
		{"another key set", natsconf.LeafUser, func() []byte {
			b, err := other.UserCreds(natsconf.LeafUser)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := k.CredsCurrent(tc.user, tc.creds)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("CredsCurrent(%s) = %v, want %v", tc.user, got, tc.want)
			}
		})
	}
	if _, err := k.CredsCurrent(natsconf.LeafUser, []byte("not a creds file")); err == nil {
		t.Error("CredsCurrent of a file with no JWT: no error")
	}
}

// TestDerivedAccountKeys: the service, operator and fan-out account keys
// are derived from the CUECAST account's seed, and every level of a tree
// derives them on its own (ServiceAccountKey): a change to the derivation
// would make levels of one tree disagree on their accounts. Pinned for a
// fixed seed.
func TestDerivedAccountKeys(t *testing.T) {
	acct, err := nkeys.FromSeed([]byte("SAAACAQDAQCQMBYIBEFAWDANBYHRAEISCMKBKFQXDAMRUGY4DUPB6IFO3A"))
	if err != nil {
		t.Fatal(err)
	}
	k := &natsconf.Keys{Account: acct}
	for _, tt := range []struct {
		name   string
		derive func() (nkeys.KeyPair, error)
		want   string
	}{
		{"service account of payments", func() (nkeys.KeyPair, error) { return k.ServiceAccountKey("payments") }, "ACYOXBYNG3E5RZGVIE76RTSCP2344FAPEEXWJS6ZYOV6ZHTFJFVMTBSQ"},
		{"operator account", k.OperatorAccountKey, "AD3T6FVKFVGEYFWTIJI6CSZUHQVSNWXF2ZOUHGMNMZD24SGSMR3YSOH4"},
		{"fan-out account", k.FanoutAccountKey, "ACHWZHAGDTV5YXK3PWZUR7TO7NZHMISTB2SSC4B3GMZJ3GLM2NKK6ZVQ"},
	} {
		kp, err := tt.derive()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got, _ := kp.PublicKey(); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}
