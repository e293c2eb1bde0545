package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/redact"
)

// NATSConfigOptions are the flags of `cuecast nats-config hub|leaf|node`.
type NATSConfigOptions struct {
	Level         natsconf.Level
	Name          string
	Domain        string
	Listen        string
	Store         string
	ClusterName   string
	ClusterListen string
	Routes        []string
	LeafListen    string
	Upstreams     []string
	Namespaces    []string
	Regions       []string
	// PerInstanceReports (leaf) opts out of summarising: the region's
	// link sends its instances' reports up, not summaries.
	PerInstanceReports bool
	Secrets            string
	Auth               string
	TLSCert            string
	TLSKey             string
	TLSCA              string
	VerifyClients      bool
	// Out, when set, is the file the configuration is written to (0600)
	// instead of stdout.
	Out string
}

// MirrorsOptions are the flags of `cuecast nats-config mirrors`.
type MirrorsOptions struct {
	NATS       string
	Domain     string
	Upstream   string
	FromHub    bool
	Namespaces []string
	Replicas   int
	Retain     int
	Conn       ConnFlags
}

func newNATSConfigCmd(env *Env, runF func(*cobra.Command, *NATSConfigOptions) error, mirrorsF func(*cobra.Command, *MirrorsOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nats-config hub|leaf|node|mirrors|cert|user",
		Short: "Print nats-server configuration for each level of the fan-out tree",
		Long: `nats-config prints a working nats-server configuration for one server of the
cuecast fan-out tree (docs/SCALING.md):

  hub    the central cluster holding the CUECAST stream (run serve --nats against it, R3)
  leaf   a regional leaf cluster, its own JetStream domain, linked to the hub
  node   a node-local leaf server, its own JetStream domain, linked to its region

Every level gets the same accounts and users: "distributor" writes versions and
pointers, "operator" reads status and steers rollouts, and "svc-<ns>" per --namespace,
in an account of its own, reads only that namespace (ccr.<ns>.> and its mirror
CUECAST_<ns>) and reports only on it (docs/SECURITY.md). Their passwords are read from
--secrets DIR (<user>.password), created there when missing; use the same directory for
every level, keep it on one admin machine, and copy each host only its configuration:
it holds bcrypt hashes of the users' passwords. --auth jwt (operator mode) is the
production choice.

` + natsConfigSecretsNote + `

A leaf (a region) summarises its instances' reports by default: its link sends the hub
one summary per config instead of one report per instance (docs/SCALING.md, "Reports
summarised per region"). The region is named --region, else --domain, else --name; the
hub lists it (hub --region NAME, needed with passwords), and 'cuecast summarize' runs
next to the leaf as summarizer-<region> (the leaf prints the command on stderr).
--per-instance-reports keeps a leaf sending every report up. A node sends its reports
to its region; a single server (serve) keeps every report itself.

With TLS every server needs its own certificate ("nats-config cert") and the CA; the
whole tree uses TLS or none (recorded in DIR/tls.mode).

After the servers run, "nats-config mirrors" creates each leaf or node domain's
namespace mirrors; services there watch with --namespace-mirror. "nats-config user"
gives one instance its own credential (operator mode).`,
		Example: `  cuecast nats-config hub --name hub-a --store /var/lib/nats --cluster-name hub \
      --cluster-listen 0.0.0.0:6222 --route hub-b:6222 --route hub-c:6222 --region eu-west \
      --namespace payments --namespace search --secrets /etc/cuecast/nats --out hub-a.conf
  cuecast nats-config leaf --name eu-west-a --domain eu-west --store /var/lib/nats \
      --upstream hub-a:7422 --upstream hub-b:7422 --namespace payments --secrets /etc/cuecast/nats \
      --out eu-west-a.conf
  cuecast nats-config node --name host-17 --store /var/lib/nats --listen 127.0.0.1:4222 \
      --upstream eu-west-a:7422 --namespace payments --secrets /etc/cuecast/nats --out host-17.conf
  cuecast nats-config mirrors --nats tls://hub-a:4222 --user distributor \
      --password-file /etc/cuecast/nats/distributor.password --tls-ca /etc/cuecast/tls/ca.pem \
      --domain eu-west --upstream hub --from-hub --namespace payments`,
	}
	for _, level := range []natsconf.Level{natsconf.Hub, natsconf.Leaf, natsconf.Node} {
		opts := &NATSConfigOptions{Level: level}
		sub := &cobra.Command{
			Use:   string(level) + " --name NAME --store DIR --secrets DIR [--out FILE]",
			Short: fmt.Sprintf("Print the configuration of a %s server", level),
			Long: fmt.Sprintf("%s prints (or writes to --out) the nats-server configuration of a %s server of the\n"+
				"fan-out tree; 'cuecast nats-config --help' describes the tree.\n\n%s", level, level, natsConfigSecretsNote),
			Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, args []string) error {
				if runF != nil {
					return runF(c, opts)
				}
				return natsConfigRun(env, opts)
			},
		}
		f := sub.Flags()
		f.StringVar(&opts.Name, "name", "", "server name, unique in the tree (required)")
		f.StringVar(&opts.Domain, "domain", "", "JetStream domain (default \"hub\" for the hub, the server name otherwise; one per cluster)")
		f.StringVar(&opts.Listen, "listen", "0.0.0.0:4222", "client address")
		f.StringVar(&opts.Store, "store", "", "JetStream store directory (required)")
		f.StringSliceVar(&opts.Namespaces, "namespace", nil, "namespace to create a service user for (repeatable)")
		f.StringVar(&opts.Secrets, "secrets", "", "directory of <user>.password files (or, with --auth jwt, the nkeys and <user>.creds files), created when missing (required)")
		f.StringVar(&opts.Auth, "auth", "password", "how users log in: password (user/password) or jwt (operator mode, .creds files)")
		f.StringVar(&opts.TLSCert, "tls-cert", "", "server certificate (PEM) for every listener and the leafnode remote")
		f.StringVar(&opts.TLSKey, "tls-key", "", "server certificate's key (PEM)")
		f.StringVar(&opts.TLSCA, "tls-ca", "", "CA (PEM) verifying the upstream and, with --tls-verify-clients, clients")
		f.BoolVar(&opts.VerifyClients, "tls-verify-clients", false, "require client certificates signed by --tls-ca")
		f.StringVar(&opts.Out, "out", "", "write the configuration, which holds secrets, to FILE (mode 0600, replaced atomically) instead of stdout")
		if level != natsconf.Node {
			f.StringVar(&opts.ClusterName, "cluster-name", "", "cluster to join (hub and regional clusters)")
			f.StringVar(&opts.ClusterListen, "cluster-listen", "0.0.0.0:6222", "cluster address, with --cluster-name")
			f.StringSliceVar(&opts.Routes, "route", nil, "another cluster member's cluster address host:port (repeatable)")
			f.StringVar(&opts.LeafListen, "leaf-listen", "0.0.0.0:7422", "where the level below connects")
		}
		switch level {
		case natsconf.Leaf:
			f.StringSliceVar(&opts.Upstreams, "upstream", nil, "leafnode address host:port of a server of the level above (repeatable, required)")
			f.StringSliceVar(&opts.Regions, "region", nil, "the name of the region this leaf summarises (default --domain, else --name): its link sends the summaries of 'cuecast summarize' up instead of its instances' reports (docs/SCALING.md)")
			f.BoolVar(&opts.PerInstanceReports, "per-instance-reports", false, "do not summarise: the link sends every instance's report up to the hub (the layout before summaries)")
		case natsconf.Node:
			f.StringSliceVar(&opts.Upstreams, "upstream", nil, "leafnode address host:port of a server of the level above (repeatable, required)")
			f.StringSliceVar(&opts.Regions, "region", nil, "make this node, linked straight to the hub, the summarising region NAME: its link sends the summaries of 'cuecast summarize' up instead of its instances' reports (docs/SCALING.md)")
		default:
			f.StringSliceVar(&opts.Regions, "region", nil, "a summarising region whose link may send its summaries (repeatable; docs/SCALING.md)")
		}
		cmd.AddCommand(sub)
	}
	cmd.AddCommand(newMirrorsCmd(env, mirrorsF))
	cmd.AddCommand(newCertCmd(env))
	cmd.AddCommand(newUserCmd(env))
	return cmd
}

// natsConfigSecretsNote is what the help of nats-config and of each level
// says of the configuration's secrets.
const natsConfigSecretsNote = `The configuration holds secrets: a leaf's or a node's the password its leafnode link
logs in with (--auth password), a clustered server's the password of its cluster's
routes (DIR/route-<cluster>.password, in both modes). Write it with --out FILE, which
is created 0600 whatever the umask, not with '> FILE', which the shell creates
world-readable under the usual umask 022; copy it only to its own host.`

// newUserCmd is `cuecast nats-config user`: one instance's own credential.
func newUserCmd(env *Env) *cobra.Command {
	var secrets, ns, instance, out string
	cmd := &cobra.Command{
		Use:   "user --secrets DIR --namespace NS --instance ID",
		Short: "Create one instance's own .creds file (operator mode): it reports only as that instance",
		Long: `User writes a .creds file for one instance of a namespace, signed with the keys in
--secrets (an operator-mode secrets directory, 'nats-config --auth jwt'): the user
reads what the namespace's services read, and may report only as instance ID
(ccs.<ns>.<ID>.>), so it cannot speak for another instance in the rollouts' health
gate. Give each instance its own file; the instance must use the same --instance.

With --auth password there are no per-instance users: every instance of a namespace
logs in as svc-<ns> and may report as any instance of it (docs/SECURITY.md).`,
		Example: `  cuecast nats-config user --secrets /etc/cuecast/nats --namespace payments --instance checkout-1 \
      --out checkout-1.creds`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if secrets == "" || ns == "" || instance == "" {
				return usageErrorf("pass --secrets, --namespace and --instance", "user: missing flags")
			}
			keys, err := readKeys(secrets)
			if err != nil {
				return err
			}
			b, err := keys.InstanceCreds(ns, instance)
			if errors.Is(err, natsconf.ErrInvalidSpec) {
				return &UsageError{Err: err, Hint: "a namespace is [a-z0-9][a-z0-9_-]*; an instance one subject token"}
			}
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(secrets, natsconf.InstanceUser(ns, instance)+".creds")
			}
			if err := writeFileAtomic(out, b); err != nil {
				return err
			}
			fmt.Fprintln(env.IO.Out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&secrets, "secrets", "", "operator-mode secrets directory (operator.nk, account.nk, system.nk)")
	cmd.Flags().StringVar(&ns, "namespace", "", "the instance's namespace")
	cmd.Flags().StringVar(&instance, "instance", "", "the instance's ID, as it passes to watch/agent --instance")
	cmd.Flags().StringVar(&out, "out", "", "where to write the .creds file (default DIR/svc-<ns>.<ID>.creds)")
	return cmd
}

// readKeys reads the operator-mode seeds of dir, which must exist.
func readKeys(dir string) (*natsconf.Keys, error) {
	var seeds [3][]byte
	for i, n := range []string{"operator.nk", "account.nk", "system.nk"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if errors.Is(err, os.ErrNotExist) {
			return nil, &UsageError{
				Err:  fmt.Errorf("%s holds no %s: per-instance users need operator mode", dir, n),
				Hint: "generate the tree with --auth jwt; with passwords every instance of a namespace shares svc-<ns>",
			}
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
		seeds[i] = []byte(strings.TrimSpace(string(b)))
	}
	return natsconf.KeysFromSeeds(seeds[0], seeds[1], seeds[2])
}

// newCertCmd is `cuecast nats-config cert`: a private CA and one server's
// certificate, for a tree without a PKI of its own.
func newCertCmd(env *Env) *cobra.Command {
	var dir, name string
	var hosts []string
	cmd := &cobra.Command{
		Use:   "cert --dir DIR --name SERVER --host HOST",
		Short: "Create the tree's CA (once) and a server's own TLS certificate",
		Long: `Cert keeps a private CA in DIR (ca.pem, ca-key.pem; created on first use, valid ten
years) and writes DIR/<name>.pem and DIR/<name>-key.pem: a certificate for server NAME
whose names are every --host (IP addresses or DNS names), signed by the CA, valid two
years, usable as server and as client certificate (leafnode remotes present it). All
files are 0600. Copy to each host only its own certificate and key and ca.pem; keep
ca-key.pem on the machine that runs this command.`,
		Example: `  cuecast nats-config cert --dir /etc/cuecast/tls --name hub-a --host hub-a.example.com
  cuecast nats-config cert --dir /etc/cuecast/tls --name host-17 --host host-17.example.com --host 127.0.0.1`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if dir == "" || name == "" || len(hosts) == 0 {
				return usageErrorf("pass --dir, --name and at least one --host", "cert: missing flags")
			}
			t, err := natsconf.EnsureTLS(dir, name, hosts)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.IO.Out, "--tls-cert %s --tls-key %s --tls-ca %s\n", t.Cert, t.Key, t.CA)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the CA and the certificates (required)")
	cmd.Flags().StringVar(&name, "name", "", "server name, as in nats-config --name (required)")
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "a name or address clients and other servers reach the server by (repeatable, required)")
	return cmd
}

func newMirrorsCmd(env *Env, runF func(*cobra.Command, *MirrorsOptions) error) *cobra.Command {
	opts := &MirrorsOptions{}
	cmd := &cobra.Command{
		Use:   "mirrors --nats URL --domain DOMAIN --upstream DOMAIN --namespace NS",
		Short: "Create the namespace mirrors of a leaf or node domain",
		Long: `Mirrors connects (as the distributor user) and creates or updates CUECAST_<ns> for
every --namespace in JetStream domain --domain, mirroring the upstream domain: the
hub's CUECAST_FANOUT (its mirror of CUECAST in the account the links log in to, which
serve creates) filtered to the namespace with --from-hub, the upstream level's
CUECAST_<ns> otherwise. Each mirror RePublishes onto ccr.<ns>.> for its level.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if opts.Domain == "" || opts.Upstream == "" || len(opts.Namespaces) == 0 {
				return usageErrorf("pass --domain, --upstream and at least one --namespace", "mirrors: missing flags")
			}
			// Checked before connecting, as the other subcommands check
			// theirs before writing.
			switch {
			case !natsconf.ValidDomain(opts.Domain):
				return usageErrorf("name the domain as nats-config gave it (1-64 of [A-Za-z0-9_-])", "mirrors: --domain %q is not a JetStream domain", opts.Domain)
			case opts.Upstream == opts.Domain:
				return usageErrorf("name the level above's domain: hub under the hub (with --from-hub), else that region's --domain", "mirrors: --upstream is --domain (%s): a domain cannot mirror itself", opts.Domain)
			// The library takes 0 for the server's defaults; a flag of 0
			// is a typo. Validate refuses the rest out of range.
			case opts.Replicas == 0:
				return usageErrorf("use 1, or 3 in a clustered domain", "mirrors: replicas 0: want 1 to 5")
			case opts.Retain == 0:
				return usageErrorf("use serve's retention of versions per config (100)", "mirrors: retain 0: want 1 or more")
			}
			if err := opts.spec().Validate(); err != nil {
				return &UsageError{Err: fmt.Errorf("mirrors: %w", err), Hint: "--replicas 1 to 5 (3 in a clustered domain), --retain serve's retention (100), namespaces as in cuecast.cue"}
			}
			if runF != nil {
				return runF(c, opts)
			}
			return mirrorsRun(c.Context(), env, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.NATS, "nats", defaultNATSURL(env), "NATS server URL (any server of the tree)")
	f.StringVar(&opts.Domain, "domain", "", "JetStream domain to create the mirrors in")
	f.StringVar(&opts.Upstream, "upstream", "", "JetStream domain of the level above")
	f.BoolVar(&opts.FromHub, "from-hub", false, "the upstream domain is the hub's (mirror its CUECAST_FANOUT filtered by namespace)")
	f.StringSliceVar(&opts.Namespaces, "namespace", nil, "namespace to mirror (repeatable)")
	f.IntVar(&opts.Replicas, "replicas", 1, "replicas of each mirror (3 in a clustered domain)")
	f.IntVar(&opts.Retain, "retain", 100, "messages kept per subject: serve's retention of versions per config")
	opts.Conn.Register(f)
	return cmd
}

func natsConfigRun(env *Env, opts *NATSConfigOptions) error {
	if opts.Name == "" || opts.Store == "" || opts.Secrets == "" {
		return usageErrorf("pass --name, --store and --secrets", "nats-config %s: missing flags", opts.Level)
	}
	spec := natsconf.Spec{
		Level:      opts.Level,
		Name:       opts.Name,
		Domain:     opts.Domain,
		Listen:     opts.Listen,
		StoreDir:   opts.Store,
		LeafListen: opts.LeafListen,
		Upstreams:  opts.Upstreams,
		Namespaces: opts.Namespaces,
	}
	switch {
	case opts.Level == natsconf.Hub:
		spec.Regions = opts.Regions
	case len(opts.Regions) > 1:
		return usageErrorf("give --region once", "nats-config %s: a server is one region", opts.Level)
	case len(opts.Regions) == 1 && opts.PerInstanceReports:
		return usageErrorf("drop --region, or --per-instance-reports", "nats-config %s: --region summarises, --per-instance-reports does not", opts.Level)
	case len(opts.Regions) == 1:
		spec.Region = opts.Regions[0]
	case opts.Level == natsconf.Leaf && !opts.PerInstanceReports:
		// A tree's region summarises unless told not to: the hub's cost
		// then stays flat in the fleet's size (docs/SCALING.md).
		spec.Region = cmp.Or(opts.Domain, opts.Name)
		if !cuecast.ValidSegment(spec.Region) {
			return usageErrorf("name the region with --region (lowercase letters, digits, - and _), or pass --per-instance-reports",
				"nats-config leaf: a leaf summarises its region by default, and %q cannot name a region", spec.Region)
		}
	}
	if opts.ClusterName != "" {
		spec.Cluster = &natsconf.Cluster{Name: opts.ClusterName, Listen: opts.ClusterListen, Routes: opts.Routes}
	} else if len(opts.Routes) > 0 {
		return usageErrorf("add --cluster-name", "--route without a cluster")
	}
	if opts.TLSCert != "" || opts.TLSKey != "" || opts.TLSCA != "" || opts.VerifyClients {
		spec.TLS = &natsconf.TLS{Cert: opts.TLSCert, Key: opts.TLSKey, CA: opts.TLSCA, VerifyClients: opts.VerifyClients}
	}
	if err := sameTLS(opts.Secrets, spec.TLS != nil); err != nil {
		return err
	}
	if c := spec.Cluster; c != nil {
		// Its name names the route password's file: checked before it is.
		if !natsconf.ValidDomain(c.Name) {
			return usageErrorf("name the cluster with 1-64 of [A-Za-z0-9_-]", "nats-config %s: cluster name %q", opts.Level, c.Name)
		}
		// Every member reads the same one, in either --auth mode: a route
		// is no user of an account.
		pw, err := loadSecrets(opts.Secrets, []string{natsconf.RouteUser(c.Name)})
		if err != nil {
			return err
		}
		c.Password = pw[natsconf.RouteUser(c.Name)]
	}
	var err error
	switch opts.Auth {
	case "password":
		spec.Passwords, err = loadSecrets(opts.Secrets, spec.Users())
	case "jwt":
		spec.Keys, err = loadKeys(opts.Secrets, spec.Users(), env.IO.ErrOut)
		leafUser := natsconf.LeafUser
		if spec.Region != "" {
			leafUser = natsconf.RegionUser(spec.Region)
		}
		spec.LeafCreds = filepath.Join(opts.Secrets, leafUser+".creds")
		if abs, aerr := filepath.Abs(spec.LeafCreds); aerr == nil {
			spec.LeafCreds = abs
		}
	default:
		return usageErrorf("use --auth password or --auth jwt", "--auth %q", opts.Auth)
	}
	if err != nil {
		return err
	}
	conf, err := natsconf.Generate(spec)
	if errors.Is(err, natsconf.ErrInvalidSpec) {
		return &UsageError{Err: err, Hint: fmt.Sprintf("see 'cuecast nats-config %s --help'", opts.Level)}
	}
	if err != nil {
		return err
	}
	if opts.Out != "" {
		if err := writeFileAtomic(opts.Out, []byte(conf)); err != nil {
			return err
		}
	} else if _, err := fmt.Fprint(env.IO.Out, conf); err != nil {
		return err
	}
	if spec.Region != "" {
		summarizeNote(env.IO.ErrOut, opts, spec.Region)
	}
	return nil
}

// summarizeNote tells the operator of a summarising region what else must
// run for its summaries to flow: the hub must know the region, and its
// summarizer must run next to it with its own credential.
func summarizeNote(w io.Writer, opts *NATSConfigOptions, region string) {
	user := natsconf.SummarizerUser(region)
	login := fmt.Sprintf("--user %s --password-file %s", user, filepath.Join(opts.Secrets, user+".password"))
	hub := fmt.Sprintf("the hub's configuration lists the region: cuecast nats-config hub ... --region %s", region)
	if opts.Auth == "jwt" {
		login = "--creds " + filepath.Join(opts.Secrets, user+".creds")
		hub = fmt.Sprintf("the hub needs no change (its links' credentials carry their permissions); --region %s there is harmless", region)
	}
	host, port, _ := net.SplitHostPort(opts.Listen)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = opts.Name
	}
	scheme := "nats"
	tls := ""
	if opts.TLSCert != "" {
		scheme = "tls"
		tls = " --tls-ca " + cmp.Or(opts.TLSCA, "CA.pem")
	}
	fmt.Fprintf(w, `nats-config %[1]s: %[2]s summarises region %[3]q (docs/SCALING.md, "Reports summarised per region"):
its link sends the hub one summary per config, not its instances' reports. For them to flow:
  - %[4]s
  - run next to this server, with serve's --heartbeat:
      cuecast summarize --nats %[5]s://%[6]s --region %[3]s %[7]s%[8]s
  (--per-instance-reports sends every report up instead.)
`, opts.Level, opts.Name, region, hub, scheme, net.JoinHostPort(host, port), login, tls)
}

// sameTLS keeps a tree all TLS or all plain text: the first configuration
// generated with a secrets directory records which in dir/tls.mode, and a
// later one that differs is refused. A level without TLS under one with it
// (or the reverse) would fail every leafnode handshake.
func sameTLS(dir string, tls bool) error {
	mode := "plain"
	if tls {
		mode = "tls"
	}
	path := filepath.Join(dir, "tls.mode")
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create secrets directory: %w", err)
		}
		if err := os.WriteFile(path, []byte(mode+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	}
	if was := strings.TrimSpace(string(b)); was != mode {
		hint := "pass --tls-cert, --tls-key and --tls-ca (this server's own certificate, the tree's CA)"
		if tls {
			hint = "regenerate every server's configuration with TLS (then delete " + path + "), or drop the --tls-* flags"
		}
		return &UsageError{
			Err:  fmt.Errorf("the other servers of this tree were generated with %s (%s), this one with %s: their leafnode links could not complete a handshake", was, path, mode),
			Hint: hint,
		}
	}
	return nil
}

// loadSecrets reads dir/<user>.password for every user, creating missing
// ones (0600, 24 random bytes in hex) so every level shares them.
func loadSecrets(dir string, users []string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create secrets directory: %w", err)
	}
	out := make(map[string]string, len(users))
	for _, u := range users {
		path := filepath.Join(dir, u+".password")
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			out[u] = strings.TrimSpace(string(b))
			// The configurations hold cheap hashes (natsconf.Spec.HashCost):
			// only a long random password keeps them from being guessed.
			if len(out[u]) < 32 {
				return nil, &UsageError{Err: fmt.Errorf("password file %s holds fewer than 32 characters", path), Hint: "delete it to have a random password created"}
			}
			continue
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("read password of %s: %w", u, err)
		}
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return nil, fmt.Errorf("create password of %s: %w", u, err)
		}
		out[u] = hex.EncodeToString(raw)
		if err := os.WriteFile(path, []byte(out[u]+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("write password of %s: %w", u, err)
		}
	}
	return out, nil
}

// loadKeys reads the operator, account and system account seeds from dir
// (operator.nk, account.nk, system.nk), creating them when none exist, and
// writes dir/<user>.creds for every user that has none or whose file is
// not what this version writes (natsconf.Keys.CredsCurrent), saying so on
// warn.
func loadKeys(dir string, users []string, warn io.Writer) (*natsconf.Keys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create secrets directory: %w", err)
	}
	names := []string{"operator.nk", "account.nk", "system.nk"}
	var seeds [3][]byte
	missing := 0
	for i, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		switch {
		case err == nil:
			seeds[i] = []byte(strings.TrimSpace(string(b)))
		case errors.Is(err, os.ErrNotExist):
			missing++
		default:
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
	}
	var keys *natsconf.Keys
	var err error
	switch missing {
	case 0:
		keys, err = natsconf.KeysFromSeeds(seeds[0], seeds[1], seeds[2])
	case len(names):
		if keys, err = natsconf.NewKeys(); err != nil {
			return nil, err
		}
		op, acct, sys, serr := keys.Seeds()
		if serr != nil {
			return nil, serr
		}
		for i, b := range [][]byte{op, acct, sys} {
			if werr := os.WriteFile(filepath.Join(dir, names[i]), append(b, '\n'), 0o600); werr != nil {
				return nil, fmt.Errorf("write %s: %w", names[i], werr)
			}
		}
	default:
		return nil, &UsageError{Err: fmt.Errorf("%s holds only some of %s", dir, strings.Join(names, ", ")), Hint: "restore the missing seeds, or use a new directory (every .creds file then changes)"}
	}
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		path := filepath.Join(dir, u+".creds")
		have, err := os.ReadFile(path)
		switch {
		case err == nil:
			ok, err := keys.CredsCurrent(u, have)
			if err != nil {
				return nil, &UsageError{Err: fmt.Errorf("%s: %w", path, err), Hint: "remove the file; nats-config writes it again"}
			}
			if ok {
				continue
			}
			// Signed for another account or with other rights than this
			// version gives (an older layout): keeping it would keep them.
			fmt.Fprintf(warn, "%s: signed for another account, or with other permissions, than this version gives %s; wrote it again: copy it to every server and host that uses it\n", path, u)
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		b, err := keys.UserCreds(u)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return keys, nil
}

func mirrorsRun(ctx context.Context, env *Env, opts *MirrorsOptions) error {
	connOpts, err := opts.Conn.Options(env)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(opts.NATS, append([]nats.Option{nats.Name("cuecast nats-config mirrors"), nats.Timeout(5 * time.Second)}, connOpts...)...)
	if err != nil {
		return fmt.Errorf("connect %s: %w", redact.URLs(opts.NATS), err)
	}
	defer nc.Close()
	js, err := jetstream.NewWithDomain(nc, opts.Domain)
	if err != nil {
		return fmt.Errorf("open domain %s: %w", opts.Domain, err)
	}
	if err := natsconf.Mirrors(ctx, js, opts.spec()); err != nil {
		if errors.Is(err, natsconf.ErrInvalidSpec) {
			return &UsageError{Err: err}
		}
		return err
	}
	for _, ns := range opts.Namespaces {
		fmt.Fprintf(env.IO.Out, "%s in domain %s mirrors %s\n", natsconf.MirrorStream(ns), opts.Domain, opts.Upstream)
	}
	return nil
}

func (o *MirrorsOptions) spec() natsconf.MirrorSpec {
	return natsconf.MirrorSpec{Upstream: o.Upstream, FromHub: o.FromHub, Namespaces: o.Namespaces, Replicas: o.Replicas, Retain: o.Retain}
}
