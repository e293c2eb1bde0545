package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/internal/natsconf"
)

// EmbeddedSecretsDir is where `serve --secure` keeps the embedded server's
// credentials, TLS material and configuration, under --data.
const EmbeddedSecretsDir = "nats"

// isLoopback reports whether a listen host is reachable from this machine
// only. An empty host, 0.0.0.0 and :: listen on every interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// embedded is how serve protects its embedded server.
type embedded struct {
	// dir holds the generated files (secure only).
	dir string
	// conf is the generated nats-server configuration; empty: open.
	conf string
	// connect logs serve's own connection in.
	connect []nats.Option
}

// embeddedSecurity is how the embedded server listens, once checkEmbedded
// accepted the flags: open on loopback (make demo) or with --insecure, and
// with --secure behind the users and TLS it creates (once) in --data.
func embeddedSecurity(opts *ServeOptions, host string) (embedded, error) {
	if opts.Scale.NATS != "" || !opts.Secure {
		return embedded{}, nil
	}
	dir := filepath.Join(opts.Data, EmbeddedSecretsDir)
	return secureEmbedded(opts, dir, host, filepath.Join(dir, "nats.conf"))
}

// checkEmbedded refuses the flag combinations embeddedSecurity cannot
// serve, warns about --insecure beyond loopback, and returns the listen
// host. It writes nothing: serve runs it before its data directory exists.
func checkEmbedded(opts *ServeOptions, log *slog.Logger) (host string, err error) {
	if opts.Scale.NATS != "" {
		if opts.Secure || opts.Insecure || len(opts.Namespaces) > 0 {
			return "", usageErrorf("secure the external servers with `cuecast nats-config` (docs/SCALING.md)", "--secure, --insecure and --namespace configure the embedded server, not --nats")
		}
		return "", nil
	}
	if opts.Secure && opts.Insecure {
		return "", usageErrorf("drop --insecure", "--secure and --insecure both given")
	}
	if len(opts.Namespaces) > 0 && !opts.Secure {
		return "", usageErrorf("add --secure", "--namespace creates service users, which only --secure has")
	}
	host, _, err = net.SplitHostPort(opts.Listen)
	if err != nil {
		return "", usageErrorf("use host:port, like 127.0.0.1:4222", "--listen %q: %v", opts.Listen, err)
	}
	switch {
	case opts.Secure, isLoopback(host):
		return host, nil
	case opts.Insecure:
		log.Warn("the embedded NATS server accepts anyone without credentials or TLS (--insecure): whoever reaches it can roll back, halt and delete every stream",
			"listen", opts.Listen)
		return host, nil
	}
	return "", &UsageError{
		Err:  fmt.Errorf("--listen %s is reachable beyond this host, and the embedded NATS server has no credentials or TLS", opts.Listen),
		Hint: fmt.Sprintf("add --secure (serve then creates users, passwords and TLS certificates in %s; docs/SECURITY.md), or listen on 127.0.0.1", filepath.Join(opts.Data, EmbeddedSecretsDir)),
	}
}

// secureEmbedded creates (once) the passwords of the distributor, operator
// and one service user per --namespace, a CA and a certificate for the
// listen host, and the embedded server's configuration from natsconf's
// Standalone level: the same accounts as a generated tree.
func secureEmbedded(opts *ServeOptions, dir, host, path string) (embedded, error) {
	spec := natsconf.Spec{
		Level:      natsconf.Standalone,
		Name:       "cuecast",
		Listen:     opts.Listen,
		StoreDir:   filepath.Join(opts.Data, "jetstream"),
		Namespaces: opts.Namespaces,
	}
	var err error
	if spec.Passwords, err = loadSecrets(dir, spec.Users()); err != nil {
		return embedded{}, err
	}
	// MkdirAll leaves a directory made beforehand as it was: 0755 from a
	// copy or a config tool let every user of the host list it.
	if err := os.Chmod(dir, 0o700); err != nil {
		return embedded{}, fmt.Errorf("serve --secure: %w", err)
	}
	if spec.TLS, err = natsconf.EnsureTLS(dir, "server", certHosts(host)); err != nil {
		return embedded{}, fmt.Errorf("serve --secure: %w", err)
	}
	conf, err := natsconf.Generate(spec)
	if err != nil {
		return embedded{}, &UsageError{Err: err}
	}
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return embedded{}, fmt.Errorf("serve --secure: write %s: %w", path, err)
	}
	return embedded{dir: dir, conf: path, connect: []nats.Option{
		nats.UserInfo(natsconf.DistributorUser, spec.Passwords[natsconf.DistributorUser]),
		// serve's own connection goes over TCP and TLS like any client's,
		// not in process: there the server offers TLS and first waits the
		// whole TLS timeout for a handshake a plain client never starts.
		// (Its certificate names the loopback addresses natsserver.ClientURL
		// gives for an unspecified listen host, which no certificate can
		// name.)
		nats.InProcessServer(nil), nats.RootCAs(spec.TLS.CA),
		// The server checks the password's bcrypt hash, which a busy
		// machine may take more than the default 2s for.
		nats.Timeout(10 * time.Second),
	}}, nil
}

// certHosts are the names the server certificate carries: the listen host,
// or for every interface the machine's name and addresses; always the
// loopback names, so commands on the same machine verify it too.
func certHosts(host string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if host != "" && host != "0.0.0.0" && host != "::" {
		return append(hosts, host)
	}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				hosts = append(hosts, ipn.IP.String())
			}
		}
	}
	return hosts
}

// mirrors creates the namespaces' mirrors of the secure embedded server, in
// its own domain, which services read with --namespace-mirror.
func (e embedded) mirrors(ctx context.Context, nc *nats.Conn, namespaces []string) error {
	if e.conf == "" || len(namespaces) == 0 {
		return nil
	}
	js, err := jetstream.NewWithDomain(nc, natsconf.HubDomain)
	if err != nil {
		return fmt.Errorf("create mirrors: %w", err)
	}
	return natsconf.Mirrors(ctx, js, natsconf.MirrorSpec{Upstream: natsconf.HubDomain, FromHub: true, Namespaces: namespaces, NoRePublish: true})
}

// announceLogin says how commands log in to the secure embedded server:
// the files holding the password and the CA, never the password.
func (e embedded) announceLogin(a announcer, url string) {
	if e.conf == "" {
		return
	}
	password, ca := filepath.Join(e.dir, natsconf.OperatorUser+".password"), filepath.Join(e.dir, natsconf.CAFile)
	a.say(fmt.Sprintf("cuecast serve: NATS requires a login; operators use --nats %s --user operator --password-file %s --tls-ca %s (services: --user svc-<namespace> --namespace-mirror)",
		url, password, ca),
		"nats login", "nats", url, "user", natsconf.OperatorUser, "password_file", password, "tls_ca", ca, "services", "--user svc-<namespace> --namespace-mirror")
}
