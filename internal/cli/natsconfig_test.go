package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// natsConfig runs `cuecast nats-config ARGS`, writes the configuration to a
// file and starts a server from it.
func natsConfig(t *testing.T, args ...string) *server.Server {
	t.Helper()
	code, out, errOut := run(context.Background(), append([]string{"nats-config"}, args...)...)
	if code != 0 {
		t.Fatalf("nats-config %v: exit %d: %s", args, code, errOut)
	}
	return startConf(t, out.String())
}

// startConf writes conf, a configuration nats-config printed, to a file
// and starts a server from it, shut down when t ends.
func startConf(t *testing.T, conf string) *server.Server {
	t.Helper()
	return natstest.StartConfFile(t, t.TempDir(), "nats.conf", conf).Server
}

func password(t *testing.T, dir, user string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, user+".password"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestNATSConfigTree runs the fan-out tree the way docs/SCALING.md tells an
// operator to: a hub and a node-local server from `cuecast nats-config`,
// serve against the hub as the distributor, the node's mirror from
// `nats-config mirrors`, an instance on the node as the search service,
// and status as the operator.
func TestNATSConfigTree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, auth string
		tls        bool
	}{{"password", "password", false}, {"jwt", "jwt", false}, {"password-tls", "password", true}} {
		t.Run(tc.name, func(t *testing.T) { testNATSConfigTree(t, tc.auth, tc.tls) })
	}
}

func testNATSConfigTree(t *testing.T, auth string, tls bool) {
	secrets := t.TempDir()
	// With TLS each server has its own certificate from `nats-config cert`.
	serverTLS := map[string][]string{}
	var clientTLS []string
	if tls {
		certs := t.TempDir()
		for _, name := range []string{"hub", "host-1"} {
			code, out, errOut := run(context.Background(), "nats-config", "cert", "--dir", certs, "--name", name, "--host", "127.0.0.1", "--host", "localhost")
			if code != 0 {
				t.Fatalf("cert %s: exit %d: %s", name, code, errOut)
			}
			serverTLS[name] = strings.Fields(out.String())
		}
		clientTLS = []string{"--tls-ca", filepath.Join(certs, "ca.pem")}
	}
	// login is how user authenticates (.creds in operator mode), over TLS
	// when the servers require it.
	login := func(user string) []string {
		if auth == "jwt" {
			return append([]string{"--creds", filepath.Join(secrets, user+".creds")}, clientTLS...)
		}
		return append([]string{"--user", user, "--password", password(t, secrets, user)}, clientTLS...)
	}
	leafAddr := natstest.FreeAddr(t)
	hub := natsConfig(t, append([]string{"hub", "--auth", auth, "--name", "hub", "--listen", "127.0.0.1:-1", "--leaf-listen", leafAddr,
		"--store", t.TempDir(), "--namespace", "payments", "--namespace", "search", "--secrets", secrets}, serverTLS["hub"]...)...)
	node := natsConfig(t, append([]string{"node", "--auth", auth, "--name", "host-1", "--listen", "127.0.0.1:-1", "--upstream", leafAddr,
		"--store", t.TempDir(), "--namespace", "payments", "--namespace", "search", "--secrets", secrets}, serverTLS["host-1"]...)...)
	poll.Until(t, "node linked to the hub", 20*time.Second, func() (bool, string) {
		return node.NumLeafNodes() == 1, "not yet"
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	repo := exampleRepo(t)
	serveDone := make(chan int, 1)
	data := t.TempDir()
	go func() {
		code, _, errOut := run(ctx, append([]string{"serve", "--repo", repo.Dir, "--data", data, "--interval", "20ms",
			"--nats", hub.ClientURL(), "--lease-ttl", "1s"}, login("distributor")...)...)
		if code != 0 {
			t.Errorf("serve: exit %d: %s", code, errOut)
		}
		serveDone <- code
	}()
	defer func() { cancel(); <-serveDone }()

	var out string
	poll.Until(t, "mirrors created", 30*time.Second, func() (bool, string) {
		code, o, errOut := run(ctx, append([]string{"nats-config", "mirrors", "--nats", hub.ClientURL(),
			"--domain", "host-1", "--upstream", "hub", "--from-hub",
			"--namespace", "payments", "--namespace", "search"}, login("distributor")...)...)
		out = o.String()
		return code == 0, errOut.String()
	})
	if !strings.Contains(out, "CUECAST_payments in domain host-1") {
		t.Errorf("mirrors printed %q", out)
	}

	// The one step that gives a service serve's key: the file it writes.
	poll.Until(t, "serve's trusted-keys file", 30*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(data, "trusted-keys"))
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	// In operator mode the instance has its own credential, bound to its ID.
	watchLogin := login("svc-search")
	if auth == "jwt" {
		code, o, e := run(ctx, "nats-config", "user", "--secrets", secrets, "--namespace", "search", "--instance", "search-canary-1")
		if code != 0 {
			t.Fatalf("nats-config user: exit %d: %s", code, e)
		}
		watchLogin = append([]string{"--creds", strings.TrimSpace(o.String())}, clientTLS...)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	var wout, werr interface{ String() string }
	go func() {
		defer close(watchDone)
		// A canary host of search's manifest: v1 reaches it in the first stage.
		code, o, e := run(wctx, append([]string{"watch", "--nats", node.ClientURL(), "--namespace-mirror",
			"--trusted-keys-file", filepath.Join(data, "trusted-keys"),
			"--config", "search/ranking", "--instance", "search-canary-1"}, watchLogin...)...)
		wout, werr = o, e
		if code != 0 {
			t.Errorf("watch: exit %d: %s", code, e)
		}
	}()
	// status, as the operator on the hub, sees the instance on the node.
	poll.Until(t, "status counting the instance on the node", 30*time.Second, func() (bool, string) {
		code, o, e := run(ctx, append([]string{"status", "--nats", hub.ClientURL(), "search/ranking"}, login("operator")...)...)
		ok := code == 0 && regexp.MustCompile(`(?m)^search/ranking\s+v1\s+1/1 instances`).MatchString(o.String())
		return ok, o.String() + e.String()
	})
	stopWatch()
	<-watchDone
	if !strings.Contains(wout.String(), `"version":1`) {
		t.Errorf("watch printed %q (stderr %q), want version 1 applied", wout, werr)
	}
}

func TestNATSConfigBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"node without upstream", []string{"nats-config", "node", "--name", "n", "--store", "/s", "--secrets", "SECRETS"}, "upstream"},
		{"missing store", []string{"nats-config", "hub", "--name", "h", "--secrets", "SECRETS"}, "--store"},
		{"bad namespace", []string{"nats-config", "hub", "--name", "h", "--store", "/s", "--secrets", "SECRETS", "--namespace", "Pay"}, "namespace"},
		{"unknown auth", []string{"nats-config", "hub", "--name", "h", "--store", "/s", "--secrets", "SECRETS", "--auth", "kerberos"}, "--auth"},
		{"route without cluster", []string{"nats-config", "leaf", "--name", "l", "--store", "/s", "--secrets", "SECRETS", "--upstream", "h:7422", "--route", "x:6222"}, "cluster"},
		{"replicas without nats", []string{"serve", "--replicas", "3"}, "--nats"},
		{"creds and user", []string{"status", "--creds", "x.creds", "--user", "u"}, "--creds"},
		{"password without user", []string{"watch", "--config", "a/b", "--instance", "i", "--trusted-keys-file", "k", "--password", "p"}, "--user"},
		{"cert without key", []string{"status", "--tls-cert", "c.pem"}, "key"},
		{"instance user with passwords", []string{"nats-config", "user", "--secrets", "SECRETS", "--namespace", "payments", "--instance", "web-1"}, "--auth jwt"},
		{"leaf region and opt-out", []string{"nats-config", "leaf", "--name", "l", "--store", "/s", "--secrets", "SECRETS", "--upstream", "h:7422", "--region", "eu", "--per-instance-reports"}, "--per-instance-reports"},
		{"leaf name that cannot name its region", []string{"nats-config", "leaf", "--name", "EU-West", "--store", "/s", "--secrets", "SECRETS", "--upstream", "h:7422"}, "--region"},
		{"instances without a config", []string{"status", "--instances"}, "--instances"},
		{"tls ca without a certificate", []string{"nats-config", "hub", "--name", "h", "--store", "/s", "--secrets", "SECRETS", "--tls-ca", "ca.pem"}, "its own certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "SECRETS", t.TempDir())
			}
			code, _, stderr := run(context.Background(), args...)
			if code != cli.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d naming %s", code, stderr, cli.ExitUsage, tc.want)
			}
		})
	}
}

// TestNATSConfigTLSAllOrNone: a node generated without TLS under a hub
// generated with it (or the reverse) is refused, not left to fail its
// leafnode handshake.
func TestNATSConfigTLSAllOrNone(t *testing.T) {
	secrets := t.TempDir()
	f := natstest.TLSFiles(t)
	code, _, errOut := run(context.Background(), "nats-config", "hub", "--name", "hub", "--store", "/s", "--secrets", secrets,
		"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA)
	if code != 0 {
		t.Fatalf("hub: exit %d: %s", code, errOut)
	}
	code, _, errOut = run(context.Background(), "nats-config", "node", "--name", "host-1", "--store", "/s", "--secrets", secrets, "--upstream", "hub:7422")
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "handshake") || !strings.Contains(errOut.String(), "--tls-cert") {
		t.Errorf("plain node under a TLS hub: exit %d, stderr %q; want %d saying how to fix it", code, errOut, cli.ExitUsage)
	}
	code, _, errOut = run(context.Background(), "nats-config", "node", "--name", "host-1", "--store", "/s", "--secrets", secrets, "--upstream", "hub:7422",
		"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA)
	if code != 0 {
		t.Errorf("TLS node under a TLS hub: exit %d: %s", code, errOut)
	}
}

// TestShortPasswordRefused: docs/SECURITY.md, a password file needs at
// least 32 characters (the configurations hold cheap hashes); a shorter one
// is refused with exit 2 by nats-config and serve --secure alike, and
// nothing is generated.
func TestShortPasswordRefused(t *testing.T) {
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "operator.password"), []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := run(context.Background(), "nats-config", "hub", "--name", "hub", "--store", "/s", "--secrets", secrets)
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "fewer than 32 characters") || stdout.String() != "" {
		t.Errorf("nats-config hub with a 7-character password: exit %d, stdout %d bytes, stderr %q; want %d and nothing generated", code, len(stdout.String()), errOut, cli.ExitUsage)
	}
	data := t.TempDir()
	dir := filepath.Join(data, cli.EmbeddedSecretsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "operator.password"), []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	repo := exampleRepo(t)
	code, _, errOut = run(context.Background(), "serve", "--repo", repo.Dir, "--data", data, "--secure", "--listen", "127.0.0.1:0")
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "fewer than 32 characters") {
		t.Errorf("serve --secure with a 7-character password: exit %d, stderr %q; want %d", code, errOut, cli.ExitUsage)
	}
}

// TestNATSConfigClusterRoutesLogIn: two hubs generated by nats-config
// with one --secrets route to each other with the route password it keeps
// there (0600), which each configuration holds.
func TestNATSConfigClusterRoutesLogIn(t *testing.T) {
	secrets := t.TempDir()
	addrs := []string{natstest.FreeAddr(t), natstest.FreeAddr(t)}
	var hubs []*server.Server
	for i, name := range []string{"hub-a", "hub-b"} {
		hubs = append(hubs, natsConfig(t, "hub", "--name", name, "--listen", "127.0.0.1:-1", "--leaf-listen", "127.0.0.1:-1",
			"--cluster-name", "hub", "--cluster-listen", addrs[i], "--route", addrs[1-i],
			"--store", t.TempDir(), "--namespace", "payments", "--secrets", secrets))
	}
	poll.Until(t, "the hubs routed to each other", poll.Patience, func() (bool, string) {
		return hubs[0].NumRoutes() > 0 && hubs[1].NumRoutes() > 0, fmt.Sprintf("%d and %d routes", hubs[0].NumRoutes(), hubs[1].NumRoutes())
	})
	fi, err := os.Stat(filepath.Join(secrets, "route-hub.password"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("route-hub.password: %v, mode %v; want it created 0600", err, fi)
	}
}

// TestScalingSetupWritesPrivateConfigs runs the lines of docs/SCALING.md's
// setup that generate the tree (nats-config cert, hub, leaf, node) as
// written, but for the directories $S and $T, in an empty directory. Each
// configuration holds a secret of $S (a link's or a cluster's routes'
// password), so nats-config must write it 0600 itself (--out): a shell
// redirection creates the file with the umask's mode, 0644 under the
// usual 022. The routes of each cluster have a password of their own.
func TestScalingSetupWritesPrivateConfigs(t *testing.T) {
	doc := readDoc(t, "SCALING.md")
	_, setup, ok := strings.Cut(doc, "## Setting it up")
	if !ok {
		t.Fatal(`docs/SCALING.md has no "## Setting it up"`)
	}
	_, block, _ := strings.Cut(setup, "```sh\n")
	block, _, _ = strings.Cut(block, "\n```")
	secrets, certs, dir := t.TempDir(), t.TempDir(), t.TempDir()
	t.Chdir(dir)
	confs := map[string]string{} // level ▶ the file its line wrote
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		args := shellWords(strings.NewReplacer("$S", secrets, "$T", certs).Replace(line))
		if len(args) < 3 || args[0] != "cuecast" || args[1] != "nats-config" || args[2] == "mirrors" {
			continue
		}
		if strings.Contains(line, ">") {
			t.Errorf("docs/SCALING.md writes nats-config's output with a shell redirection, which makes the file with the umask's mode: %s", line)
			continue
		}
		code, _, errOut := run(context.Background(), args[1:]...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", line, code, errOut)
		}
		if i := slices.Index(args, "--out"); i > 0 && args[2] != "cert" && args[2] != "user" {
			confs[args[2]] = args[i+1]
		}
	}
	for _, level := range []string{"hub", "leaf", "node"} {
		path, ok := confs[level]
		if !ok {
			t.Errorf("docs/SCALING.md's setup writes no %s configuration with --out", level)
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s (nats-config %s) is %v, want -rw-------", path, level, fi.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var held []string
		files, _ := filepath.Glob(filepath.Join(secrets, "*.password"))
		for _, f := range files {
			if user := strings.TrimSuffix(filepath.Base(f), ".password"); strings.Contains(string(b), password(t, secrets, user)) {
				held = append(held, user)
			}
		}
		want := map[string][]string{"hub": {"route-hub"}, "leaf": {"region-eu-west", "route-eu-west"}, "node": {"leaf"}}[level]
		if !slices.Equal(held, want) {
			t.Errorf("%s holds the passwords of %v, want %v", path, held, want)
		}
	}
	for _, f := range []string{"route-hub.password", "route-eu-west.password"} {
		fi, err := os.Stat(filepath.Join(secrets, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want it created 0600", f, err, fi)
		}
	}
}

// TestNATSConfigHelpSaysSecrets: each level's --help says its output holds
// secrets and how to write it privately.
func TestNATSConfigHelpSaysSecrets(t *testing.T) {
	for _, level := range []string{"hub", "leaf", "node"} {
		code, out, errOut := run(context.Background(), "nats-config", level, "--help")
		if code != 0 || !strings.Contains(out.String(), "holds secrets") || !strings.Contains(out.String(), "--out FILE") {
			t.Errorf("nats-config %s --help: exit %d, stderr %q; want it to say the output holds secrets and to use --out:\n%s", level, code, errOut, out)
		}
	}
}

// TestNATSConfigOutReplacesWithPrivateFile: --out over an existing
// world-readable file (a configuration written with '> FILE' before, a
// .creds copied carelessly) leaves a 0600 file, for the configurations
// and for an instance's .creds alike.
func TestNATSConfigOutReplacesWithPrivateFile(t *testing.T) {
	secrets, dir := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"node.conf", []string{"nats-config", "node", "--auth", "jwt", "--name", "host-1", "--store", "/s", "--upstream", "leaf:7422", "--namespace", "payments", "--secrets", secrets}},
		{"web-1.creds", []string{"nats-config", "user", "--secrets", secrets, "--namespace", "payments", "--instance", "web-1"}},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := run(context.Background(), append(tc.args, "--out", path)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, errOut)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); fi.Mode().Perm() != 0o600 || string(b) == "old\n" {
			t.Errorf("%s after --out: %v, %d bytes; want it replaced, -rw-------", tc.name, fi.Mode().Perm(), len(b))
		}
	}
}
