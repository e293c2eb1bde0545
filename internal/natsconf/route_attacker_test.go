package natsconf_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestRoutesRefuseAStranger: docs/SECURITY.md, anyone on the network. A
// nats-server of the attacker's own, with its own users (its own
// "distributor"), routes to a hub server started from the configuration
// nats-config generates, knowing what the docs tell everyone: the
// cluster's name and address and the account's name (in operator mode its
// public key, which every configuration holds); with TLS also a
// certificate of the tree's CA, which every node host holds. A route
// bypasses every account's users and permissions, so it must not come up,
// and a version the attacker publishes on its own server must not reach a
// subscriber at the hub; the hub's own servers still form their cluster
// and carry a message published on one to a subscriber on the other.
func TestRoutesRefuseAStranger(t *testing.T) {
	for _, mode := range []struct {
		name     string
		jwt, tls bool
	}{{"password", false, false}, {"jwt", true, false}, {"password-tls", false, true}} {
		t.Run(mode.name, func(t *testing.T) {
			tr, hubs := natstest.StartHubClusterWith(t, 2, natstest.TreeOptions{Namespaces: []string{"payments"}, JWT: mode.jwt, TLS: mode.tls})
			testRoutesRefuseAStranger(t, tr, hubs)
		})
	}
}

func testRoutesRefuseAStranger(t *testing.T, tr *natstest.Tree, hubs []*natstest.TreeServer) {
	const subject = "cc.payments.v.checkout"
	account := natsconf.Account
	if tr.Keys != nil {
		pub, err := tr.Keys.Account.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		account = pub
	}
	hub, other := hubs[0], hubs[1]

	// The hub's own word that it judged a route and refused it: the
	// authentication error event of its system account.
	refusals := make(chan *nats.Msg, 64)
	sys := hub.Connect(t, natsconf.SystemUser)
	if _, err := sys.ChanSubscribe(fmt.Sprintf("$SYS.SERVER.%s.CLIENT.AUTH.ERR", hub.ID()), refusals); err != nil {
		t.Fatal(err)
	}
	if err := sys.Flush(); err != nil {
		t.Fatal(err)
	}
	victim := hub.Connect(t, natsconf.DistributorUser)
	sub, err := victim.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.Flush(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the subscription at "+hub.Name()+" known at "+other.Name(), poll.Patience, func() (bool, string) {
		acc, err := other.LookupAccount(account)
		if err != nil {
			return false, err.Error()
		}
		return acc.SubscriptionInterest(subject), "no interest"
	})

	rogue := startRogue(t, tr, account, hub.Spec.Cluster.Listen)
	refused := false
	poll.Until(t, "the hub refusing the stranger's route, or the route up", poll.Patience, func() (bool, string) {
		for drained := false; !drained; {
			select {
			case m := <-refusals:
				var ev server.DisconnectEventMsg
				if err := json.Unmarshal(m.Data, &ev); err != nil {
					t.Fatalf("authentication error event: %v: %s", err, m.Data)
				}
				if ev.Client.Kind == "Router" {
					refused = true
					return true, ""
				}
			default:
				drained = true
			}
		}
		// The hub's routes, not the stranger's count: the stranger counts
		// a route from the hub's INFO, before the hub has read (and
		// refused) its credentials; at load 16 that count made the route
		// look up, and the test waited for a message the hub never took.
		rz, err := hub.Routez(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rz.Routes {
			if r.RemoteName == "rogue" {
				return true, ""
			}
		}
		return false, "neither"
	})
	forger := rogue.Connect(t, nats.UserInfo(natsconf.DistributorUser, "rogue"))
	if !refused {
		// Show what the route gives the stranger: its publish reaches
		// the hub's subscriber (asked again until the interest crossed).
		var got *nats.Msg
		poll.Until(t, "the stranger's message at the hub", poll.Patience, func() (bool, string) {
			if err := forger.Publish(subject, []byte("forged")); err != nil {
				t.Fatal(err)
			}
			if err := forger.Flush(); err != nil {
				t.Fatal(err)
			}
			got, _ = sub.NextMsg(100 * time.Millisecond)
			return got != nil, "nothing received"
		})
		t.Fatalf("a stranger's server got a route up to %s (%d routes at the stranger) and its message on %s reached a subscriber there: %q",
			hub.Name(), rogue.NumRoutes(), subject, got.Data)
	}

	if err := forger.Publish(subject, []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}
	// The stranger counts its route from the hub's INFO until the hub's
	// close of it reaches the stranger, which on a loaded box came after
	// the refusal event (1 route seen at load 15): the route must go, not
	// be gone at the instant of the event.
	poll.Until(t, "the stranger's server without a route", poll.Patience, func() (bool, string) {
		n := rogue.NumRoutes()
		return n == 0, fmt.Sprintf("%d routes", n)
	})
	rz, err := hub.Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, r := range rz.Routes {
		peers = append(peers, r.RemoteName)
	}
	if slices.Contains(peers, "rogue") || !slices.Contains(peers, other.Name()) {
		t.Errorf("%s routes to %v, want %s and not the stranger", hub.Name(), peers, other.Name())
	}
	// The hub's own cluster still carries what is published on it.
	pub := other.Connect(t, natsconf.DistributorUser)
	if err := pub.Publish(subject, []byte("genuine")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(poll.Patience)
	if err != nil {
		t.Fatalf("the message published at %s: %v", other.Name(), err)
	}
	if string(m.Data) != "genuine" {
		t.Errorf("the subscriber at %s got %q, want only the message published at %s", hub.Name(), m.Data, other.Name())
	}
}

// startRogue starts the stranger's server: its own account named as the
// tree's (its own user "distributor" with its own password "rogue"), in
// the hub's cluster by name, routing to route, with TLS the tree's CA and
// a certificate it signed.
func startRogue(t *testing.T, tr *natstest.Tree, account, route string) *natstest.Server {
	t.Helper()
	tlsBlock := ""
	if tl := tr.TLS; tl != nil {
		tlsBlock = fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q }", tl.Cert, tl.Key, tl.CA)
	}
	u := url.URL{Scheme: "nats-route", Host: route}
	conf := fmt.Sprintf(`server_name: "rogue"
host: "127.0.0.1"
port: -1
accounts {
  %q { users: [{user: %q, password: "rogue"}] }
}
cluster {
  name: "hub"
  listen: "127.0.0.1:-1"
  routes: [%q]
  %s
}
`, account, natsconf.DistributorUser, u.String(), tlsBlock)
	return natstest.StartConfFile(t, t.TempDir(), "rogue.conf", conf)
}
