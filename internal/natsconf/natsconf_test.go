package natsconf_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func passwords(s natsconf.Spec) map[string]string {
	p := map[string]string{}
	for _, u := range s.Users() {
		p[u] = "pw-" + u
	}
	return p
}

func goldenSpecs() map[string]natsconf.Spec {
	tls := &natsconf.TLS{Cert: "/etc/cuecast/tls/server.pem", Key: "/etc/cuecast/tls/server-key.pem", CA: "/etc/cuecast/tls/ca.pem"}
	specs := map[string]natsconf.Spec{
		"hub": {
			Level: natsconf.Hub, Name: "hub-a", StoreDir: "/var/lib/nats",
			Cluster:    &natsconf.Cluster{Name: "hub", Listen: "0.0.0.0:6222", Routes: []string{"hub-b:6222", "hub-c:6222"}, Password: "pw-route-hub"},
			Namespaces: []string{"payments", "search"},
		},
		"hub-tls": {
			Level: natsconf.Hub, Name: "hub-a", StoreDir: "/var/lib/nats",
			Cluster:    &natsconf.Cluster{Name: "hub", Listen: "0.0.0.0:6222", Routes: []string{"hub-b:6222"}, Password: "pw-route-hub"},
			Namespaces: []string{"payments"}, TLS: tls,
		},
		"leaf": {
			Level: natsconf.Leaf, Name: "eu-west-a", Domain: "eu-west", StoreDir: "/var/lib/nats",
			Cluster:    &natsconf.Cluster{Name: "eu-west", Listen: "0.0.0.0:6222", Routes: []string{"eu-west-b:6222"}, Password: "pw-route-eu-west"},
			Upstreams:  []string{"hub-a:7422", "hub-b:7422"},
			Namespaces: []string{"payments", "search"},
		},
		// A tree's summarising region (nats-config leaf's default) and
		// the hub that lets its link send summaries.
		"leaf-region": {
			Level: natsconf.Leaf, Name: "eu-west-a", Domain: "eu-west", Region: "eu-west", StoreDir: "/var/lib/nats",
			Upstreams:  []string{"hub-a:7422"},
			Namespaces: []string{"payments"},
		},
		"hub-regions": {
			Level: natsconf.Hub, Name: "hub-a", StoreDir: "/var/lib/nats",
			Namespaces: []string{"payments"}, Regions: []string{"eu-west", "us-east"},
		},
		"node": {
			Level: natsconf.Node, Name: "host-17", StoreDir: "/var/lib/nats", Listen: "127.0.0.1:4222",
			Upstreams:  []string{"eu-west-a:7422"},
			Namespaces: []string{"payments", "search"}, TLS: tls,
		},
	}
	for name, s := range specs {
		s.Passwords = passwords(s)
		specs[name] = s
	}
	return specs
}

// eachGenerated runs check, as a subtest named for the spec, on the
// configuration Generate writes for each golden spec.
func eachGenerated(t *testing.T, check func(t *testing.T, name string, spec natsconf.Spec, got string)) {
	for name, spec := range goldenSpecs() {
		t.Run(name, func(t *testing.T) {
			got, err := natsconf.Generate(spec)
			if err != nil {
				t.Fatalf("generate: %v", err)
			}
			check(t, name, spec, got)
		})
	}
}

// bcryptHash matches the hashes Generate writes for passwords; they are
// salted, so the golden files hold a placeholder.
var bcryptHash = regexp.MustCompile(`"\$2a\$04\$[./A-Za-z0-9]{53}"`)

func TestGenerateGolden(t *testing.T) {
	eachGenerated(t, func(t *testing.T, name string, spec natsconf.Spec, got string) {
		got = bcryptHash.ReplaceAllString(got, `"<bcrypt hash>"`)
		path := filepath.Join("testdata", name+".conf")
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read golden (run with -update): %v", err)
		}
		if got != string(want) {
			t.Errorf("config differs from %s (run with -update):\n%s", path, got)
		}

		// The nats-server loader accepts it (with TLS files that exist)
		// and reads back what we meant.
		if spec.TLS != nil {
			spec.TLS = natstest.TLSFiles(t)
			if got, err = natsconf.Generate(spec); err != nil {
				t.Fatalf("generate: %v", err)
			}
		}
		tmp := filepath.Join(t.TempDir(), name+".conf")
		if err := os.WriteFile(tmp, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		opts, err := server.ProcessConfigFile(tmp)
		if err != nil {
			t.Fatalf("process config: %v", err)
		}
		if !opts.JetStream || opts.JetStreamDomain == "" || opts.ServerName != spec.Name {
			t.Errorf("jetstream %v domain %q name %q, want on, a domain, %q", opts.JetStream, opts.JetStreamDomain, opts.ServerName, spec.Name)
		}
		if opts.SystemAccount != natsconf.SystemAccount {
			t.Errorf("system account %q, want %q", opts.SystemAccount, natsconf.SystemAccount)
		}
		if n := len(opts.LeafNode.Remotes); (spec.Level != natsconf.Hub) != (n == 1) {
			t.Errorf("%d leafnode remotes for a %s", n, spec.Level)
		}
		for _, r := range opts.LeafNode.Remotes {
			wantDeny := 1
			if spec.Region != "" {
				wantDeny = 2 // and its reports, which its summarizer sends up
			}
			if r.LocalAccount != natsconf.Account || len(r.DenyImports) != 1 || len(r.DenyExports) != wantDeny {
				t.Errorf("remote account %q deny %v %v, want %s and ccr.> both ways", r.LocalAccount, r.DenyImports, r.DenyExports, natsconf.Account)
			}
			if len(r.URLs) != len(spec.Upstreams) {
				t.Errorf("remote urls %v, want %d", r.URLs, len(spec.Upstreams))
			}
			if r.Compression.Mode != "" {
				t.Errorf("remote compression %q, want it unset: nats-server's s2_auto (docs/SCALING.md)", r.Compression.Mode)
			}
		}
		if m := opts.LeafNode.Compression.Mode; m != "" {
			t.Errorf("leafnodes compression %q, want it unset: nats-server's s2_auto (docs/SCALING.md)", m)
		}
		if (spec.TLS != nil) != (opts.TLSConfig != nil || opts.TLSCert != "") {
			t.Errorf("tls %v, want %v", opts.TLSCert, spec.TLS != nil)
		}
		users := map[string]*server.User{}
		for _, u := range opts.Users {
			users[u.Username] = u
		}
		svc := users[natsconf.ServiceUser("payments")]
		if svc == nil || svc.Account.Name != natsconf.ServiceAccount("payments") {
			t.Fatalf("no service user payments in account %s: %v", natsconf.ServiceAccount("payments"), users)
		}
		if got := strings.Join(svc.Permissions.Subscribe.Allow, " "); got != "ccr.payments.> _INBOX_payments.>" {
			t.Errorf("payments may subscribe to %s", got)
		}
		if d := users[natsconf.DistributorUser]; d == nil || d.Permissions != nil {
			t.Errorf("distributor %v, want a user without restrictions", d)
		}
		if c := spec.Cluster; c != nil {
			// Routes log in, and log in to the others.
			if opts.Cluster.Username != natsconf.RouteUser(c.Name) || opts.Cluster.Password != c.Password {
				t.Errorf("cluster authorization %q/%q, want %s with the cluster's password", opts.Cluster.Username, opts.Cluster.Password, natsconf.RouteUser(c.Name))
			}
			for _, r := range opts.Routes {
				if pw, _ := r.User.Password(); r.User.Username() != natsconf.RouteUser(c.Name) || pw != c.Password {
					t.Errorf("route %s logs in as %q, want %s with the cluster's password", r.Host, r.User.Username(), natsconf.RouteUser(c.Name))
				}
			}
			if len(opts.Routes) != len(c.Routes) {
				t.Errorf("%d routes, want %d", len(opts.Routes), len(c.Routes))
			}
		}
	})
}

func TestGenerateRejects(t *testing.T) {
	valid := natsconf.Spec{Level: natsconf.Node, Name: "n", StoreDir: "/s", Upstreams: []string{"leaf:7422"}, Namespaces: []string{"payments"}}
	valid.Passwords = passwords(valid)
	for _, tc := range []struct {
		name string
		edit func(*natsconf.Spec)
		want string
	}{
		{"unknown level", func(s *natsconf.Spec) { s.Level = "edge" }, "level"},
		{"no name", func(s *natsconf.Spec) { s.Name = "" }, "server name"},
		{"dotted domain", func(s *natsconf.Spec) { s.Domain = "eu.west" }, "domain"},
		{"no store", func(s *natsconf.Spec) { s.StoreDir = "" }, "store directory"},
		{"node without upstream", func(s *natsconf.Spec) { s.Upstreams = nil }, "upstream"},
		{"hub with upstream", func(s *natsconf.Spec) { s.Level = natsconf.Hub }, "no upstream"},
		{"clustered node", func(s *natsconf.Spec) { s.Cluster = &natsconf.Cluster{Name: "c", Listen: ":6222", Password: "p"} }, "not clustered"},
		{"cluster without a route password", func(s *natsconf.Spec) {
			s.Level, s.Upstreams = natsconf.Hub, nil
			s.Cluster = &natsconf.Cluster{Name: "hub", Listen: ":6222", Routes: []string{"hub-b:6222"}}
		}, "no route password"},
		{"bad namespace", func(s *natsconf.Spec) { s.Namespaces = []string{"Pay.ments"} }, "namespace"},
		{"twice", func(s *natsconf.Spec) { s.Namespaces = []string{"a", "a"} }, "twice"},
		{"missing password", func(s *natsconf.Spec) { s.Passwords = map[string]string{} }, "no password"},
		{"cert without key", func(s *natsconf.Spec) { s.TLS = &natsconf.TLS{Cert: "c.pem"} }, "both"},
		{"bad upstream", func(s *natsconf.Spec) { s.Upstreams = []string{"leaf"} }, "upstream"},
		{"a CA without a certificate", func(s *natsconf.Spec) { s.TLS = &natsconf.TLS{CA: "ca.pem"} }, "its own certificate"},
		{"a certificate without the CA", func(s *natsconf.Spec) { s.TLS = &natsconf.TLS{Cert: "c.pem", Key: "k.pem"} }, "--tls-ca"},
		{"standalone with upstream", func(s *natsconf.Spec) { s.Level = natsconf.Standalone }, "no upstream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid
			s.Passwords = passwords(valid)
			tc.edit(&s)
			_, err := natsconf.Generate(s)
			if !errors.Is(err, natsconf.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrInvalidSpec about %q", err, tc.want)
			}
		})
	}
}

// The client spells the namespace mirror and inbox itself (it imports no
// internal package); both spellings must agree.
func TestClientAgreesOnNamespaceNames(t *testing.T) {
	for _, ns := range []string{"payments", "search-2"} {
		if got, want := client.NamespaceStream(ns), natsconf.MirrorStream(ns); got != want {
			t.Errorf("client.NamespaceStream(%q) = %q, want %q", ns, got, want)
		}
		if got, want := client.NamespaceInbox(ns), natsconf.InboxPrefix(ns); got != want {
			t.Errorf("client.NamespaceInbox(%q) = %q, want %q", ns, got, want)
		}
	}
}

// TestGenerateHoldsNoPasswords: a server's configuration, readable by
// whoever runs the host, holds bcrypt hashes, never a password a client
// could log in with; only a leaf or node server holds one: the leaf
// user's (a summarising region's: its region user's), which its leafnode
// remote logs in with upstream. A clustered server holds its cluster's
// route password, in its authorization and in each route's URL, and no
// other's.
func TestGenerateHoldsNoPasswords(t *testing.T) {
	eachGenerated(t, func(t *testing.T, name string, spec natsconf.Spec, got string) {
		for user, pw := range spec.Passwords {
			n := strings.Count(got, pw)
			want := 0
			linkUser := natsconf.LeafUser
			if spec.Region != "" {
				linkUser = natsconf.RegionUser(spec.Region)
			}
			if user == linkUser && spec.Level != natsconf.Hub {
				want = len(spec.Upstreams)
			}
			if n != want {
				t.Errorf("the password of %s appears %d times, want %d", user, n, want)
			}
		}
		if !bcryptHash.MatchString(got) {
			t.Errorf("no bcrypt hash in\n%s", got)
		}
		if c := spec.Cluster; c != nil {
			if n, want := strings.Count(got, c.Password), 1+len(c.Routes); n != want {
				t.Errorf("the route password appears %d times, want %d", n, want)
			}
		}
	})
}
