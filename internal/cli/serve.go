package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/hostcheck"
	"github.com/cuecast/cuecast/internal/httpsrv"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/web"
	"github.com/cuecast/cuecast/mutator"
	"github.com/cuecast/cuecast/tailer"
)

// ServeOptions are the flags of `cuecast serve`.
type ServeOptions struct {
	Repo   string
	Branch string
	Data   string
	Listen string
	// SigningKey is the seed file serve signs with; empty: <data>/signing.nk.
	SigningKey string
	Interval   time.Duration
	StartAt    string
	// HTTP is the operations server's address (dashboard, /metrics,
	// /healthz, /readyz, /hooks/github); empty: none.
	HTTP string
	// HTTPHosts are more names the operations server answers to
	// (hostcheck.ForBind): on a loopback --http, only loopback and these.
	HTTPHosts []string
	// HTTPMaxConns is how many connections each of --http and --ofrep
	// serves at once (httpsrv.Limits).
	HTTPMaxConns  int
	OperatorToken string
	WebhookSecret string
	// OFREPTokens is a file of NAMESPACE TOKEN lines: with it the
	// operations server serves OFREP (docs/FLAGS.md, "Other languages").
	OFREPTokens string
	// OFREP is the address of a listener serving OFREP alone, instead of
	// the operations server (pipeline.Config.OFREP).
	OFREP string
	// APITokens is a file of namespace tokens for the set API (web.ReadTokens).
	APITokens string
	// InlineLimit is distributor.Options.InlineLimit: content up to this
	// many bytes rides in every pointer message.
	InlineLimit int
	// Heartbeat is how often instances report when nothing changes; it
	// must equal theirs (watch/agent --heartbeat, client.WithHeartbeat).
	Heartbeat time.Duration
	// Scale runs serve against an external NATS, one replica of several.
	Scale ServeScale
	// Secure gives the embedded server users, passwords and TLS, created
	// in --data (servesecure.go); Namespaces get a service user each.
	// Insecure lets it listen beyond loopback without them.
	Secure     bool
	Insecure   bool
	Namespaces []string
	// Git logs in to a private --repo (gitauth.go).
	Git GitCredentials
	// Prometheus is the base URL of the Prometheus that stage analyses
	// query (docs/ROLLOUT.md, "Analysis"); empty: none.
	Prometheus string
	// PrometheusTimeout bounds each of its queries.
	PrometheusTimeout time.Duration
}

func newServeCmd(env *Env, runF func(*cobra.Command, *ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve --repo PATH",
		Short: "Run the pipeline: embedded NATS, the tailer and the distributor",
		Long: `Serve runs the whole pipeline in one process. It starts a NATS server with
JetStream (its store under --data), follows --branch of --repo with go-git, compiles
each new commit (only the configs it affects) and publishes a new version for every
config whose output changed, then points every instance at it.

A restart resumes from the last commit fully published: no version is skipped or
published twice. A version number is never reused: when the JetStream store has
lost versions that were published (damaged or deleted files), serve refuses to
publish, says so in its log and on /readyz, until ` + "`cuecast repair`" + `.

A private remote --repo: over https, a token read from --git-token-file (or
$CUECAST_GIT_TOKEN; never a flag value), with --git-ca for a private CA; over ssh,
a deploy key (--git-ssh-key) and the known_hosts file the server's host key must be
in (--git-known-hosts). A credential the repository refuses, or an unknown host key,
exits 2 at start saying which.

A commit that does not compile is logged as rejected and publishes nothing; the
last good versions stay in service.

On first start serve creates an ed25519 signing key (--signing-key, default
<data>/signing.nk). On every start it adds the key's public half to
<data>/trusted-keys, the file every service needs: give it to them as
--trusted-keys-file (watch, agent) or client.WithTrustedKeysFile; ` + "`cuecast keys`" + `
prints it. Services refuse to start without it. Rotating the key: see ` + "`cuecast keys new`" + `.

Serve locks --data: a second serve (or repair) over the same directory exits at
once, naming the PID of the one that holds it. A --listen or --http port already
in use fails at once, naming the port. The embedded NATS server's warnings and
errors are in serve's log (component=nats).

On a full disk under --data serve keeps running, /readyz answering 503 with why
and the failed publishes counted; once there is free space again it exits
(status 1) for its supervisor to start it again, which reopens the store
(docs/OPERATIONS.md, "A full disk").

The embedded NATS server listens on 127.0.0.1 and needs no login there. Any other
--listen address needs --secure: serve then creates (once, 0600, in --data/nats) a
password for the users "distributor" (serve itself), "operator" and "svc-<ns>" per
--namespace, a CA and a server certificate for the listen host, and runs the server
with TLS and the same accounts as 'cuecast nats-config' (docs/SECURITY.md). Without
--secure serve refuses such an address.

On a loopback --http (127.0.0.1, [::1], localhost) the operations server answers
only requests whose Host is a loopback address or localhost, any port, and the
names given with --http-host (a reverse proxy that forwards its public Host, an
SSH tunnel's name); any other Host gets 421 Misdirected Request. A web page whose
name is re-resolved to 127.0.0.1 (DNS rebinding) so reads nothing. On another
address, with --http-host, only those names and the address itself; without it,
any Host: whatever reaches that network reads the server anyway (docs/SECURITY.md).

With --http and --ofrep-tokens FILE (lines "NAMESPACE TOKEN", mode 600 or 640) serve also
evaluates every flag set for any OpenFeature SDK (the settled version: what
an instance no rollout stage has reached runs, so a rollout's new version only
once a stage moves everyone, and the one a rollback or a halt moves back to;
a service staged with its instances reads an agent's --ofrep instead),
over OFREP at /ofrep/v1/, to tokens of the flag's namespace (docs/FLAGS.md,
"Other languages"). Give it a listener of its own with --ofrep ADDR: the
operations server's reads (/api/*, the dashboard) need no token, so services
that reach --http for OFREP read every config and flag set there. Without
--ofrep, OFREP stays on --http, and serve warns at start.

Exit status 2 when --repo is not a Git repository, --branch does not exist, or
--listen or --http is not HOST:PORT (port 0 to 65535); these are checked before
anything is created in --data.`,
		Example: `  cuecast serve --repo ~/src/configs --data /var/lib/cuecast
  cuecast serve --repo . --listen 127.0.0.1:4333 --interval 500ms
  cuecast serve --repo ~/src/configs --data /var/lib/cuecast --listen 0.0.0.0:4222 \
      --secure --namespace payments --namespace search`,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c, opts)
			}
			return serveRun(c, env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Repo, "repo", ".", "config repository to follow (a local path, or a URL to clone)")
	cmd.Flags().StringVar(&opts.Branch, "branch", "main", "branch to follow")
	cmd.Flags().StringVar(&opts.Data, "data", ".cuecast", "data directory: JetStream store, signing key, clones")
	opts.Git.flags(cmd.Flags())
	cmd.Flags().StringVar(&opts.SigningKey, "signing-key", "", "ed25519 seed file to sign with, created when missing (default <data>/signing.nk)")
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:4222", "address of the embedded NATS server")
	cmd.Flags().DurationVar(&opts.Interval, "interval", 0, "poll interval (default 1s for a local repo, 5s for a remote one)")
	cmd.Flags().StringVar(&opts.StartAt, "start-at", "", "on an empty data directory, begin from this commit instead of the branch's root")
	cmd.Flags().StringVar(&opts.HTTP, "http", "", "address of the operations server: dashboard, /metrics, /healthz, /readyz, /hooks/github (e.g. 127.0.0.1:8080)")
	cmd.Flags().StringArrayVar(&opts.HTTPHosts, "http-host", nil,
		"a name the operations server (and --ofrep) answers to besides its address (repeatable): a reverse proxy's public name, an SSH tunnel's; on a loopback --http any other Host gets 421, against DNS rebinding")
	cmd.Flags().IntVar(&opts.HTTPMaxConns, "http-max-conns", httpsrv.DefaultMaxConns,
		"connections each of --http and --ofrep serves at once; more wait until one closes (docs/OPERATIONS.md)")
	cmd.Flags().StringVar(&opts.APITokens, "api-tokens", "", "file of namespace tokens (NAME NAMESPACES SHA256 a line) that may change their namespaces' configs through POST /api/set (docs/CHANGING.md)")
	cmd.Flags().StringVar(&opts.OperatorToken, "operator-token", "", "bearer token enabling the dashboard's rollout actions (default $CUECAST_OPERATOR_TOKEN; empty: read-only)")
	cmd.Flags().StringVar(&opts.WebhookSecret, "webhook-secret", "", "secret verifying GitHub push webhooks at /hooks/github (default $CUECAST_WEBHOOK_SECRET)")
	cmd.Flags().StringVar(&opts.OFREPTokens, "ofrep-tokens", "", "file of NAMESPACE TOKEN lines, mode 600 or 640: serve each flag set's settled version (what an instance no rollout stage has reached runs) over OFREP at /ofrep/v1/ to requests carrying a token of the flag's namespace")
	cmd.Flags().StringVar(&opts.OFREP, "ofrep", "",
		"with --ofrep-tokens: serve OFREP on this address alone (HOST:PORT), not on --http, so that services reach their flags without reaching the operations server's reads, which need no token")
	cmd.Flags().IntVar(&opts.InlineLimit, "inline-limit", distributor.DefaultInlineLimit,
		"largest config (bytes) carried inside every pointer message: one message per instance per change, at the cost of a stored copy per cohort pointer; -1 never (docs/PROTOCOL.md §4.2)")
	cmd.Flags().DurationVar(&opts.Heartbeat, "heartbeat", 15*time.Second,
		"how often instances report when nothing changes; give every instance the same (watch and agent --heartbeat, client.WithHeartbeat): a report is live for four. Longer cuts the fleet's cost at rest (docs/SCALING.md)")
	cmd.Flags().StringVar(&opts.Prometheus, "prometheus", "",
		"base URL of the Prometheus that stages with an analysis are judged from (default $CUECAST_PROMETHEUS_URL; docs/ROLLOUT.md, \"Analysis\")")
	registerPrometheusTimeout(cmd.Flags(), &opts.PrometheusTimeout, "is an evaluation error (max_errors)")
	cmd.Flags().BoolVar(&opts.Secure, "secure", false, "give the embedded NATS server users, passwords and TLS, created in --data/nats (required to --listen beyond loopback)")
	cmd.Flags().StringSliceVar(&opts.Namespaces, "namespace", nil, "with --secure: namespace whose services get a user svc-<ns> and a mirror (repeatable)")
	cmd.Flags().BoolVar(&opts.Insecure, "insecure", false, "let the embedded NATS server listen beyond loopback without credentials or TLS: anyone reaching it controls cuecast")
	opts.Scale.register(cmd.Flags())
	return cmd
}

func serveRun(c *cobra.Command, env *Env, opts *ServeOptions) error {
	ctx := c.Context()
	log := env.Logger()
	// The flags without --http would be silently useless; the environment
	// variables may be set for every invocation and are simply unused then.
	if opts.HTTP == "" && (opts.OperatorToken != "" || opts.WebhookSecret != "" || opts.OFREPTokens != "" || opts.APITokens != "") {
		return usageErrorf("add --http ADDR", "--operator-token, --webhook-secret, --ofrep-tokens and --api-tokens need the operations server")
	}
	if opts.OFREP != "" {
		if opts.OFREPTokens == "" {
			return usageErrorf("add --ofrep-tokens FILE (lines NAMESPACE TOKEN)", "--ofrep serves the flag sets to tokens: it needs --ofrep-tokens")
		}
		if opts.HTTP == "" {
			return usageErrorf("add --http ADDR (127.0.0.1:PORT keeps it to this host)", "--ofrep needs the operations server, which reads the flag sets it serves")
		}
		if err := checkHostPort("ofrep", opts.OFREP); err != nil {
			return err
		}
	}
	if opts.HTTP == "" && len(opts.HTTPHosts) > 0 {
		return usageErrorf("add --http ADDR", "--http-host names the operations server")
	}
	if opts.HTTP == "" && c.Flags().Changed("http-max-conns") {
		return usageErrorf("add --http ADDR", "--http-max-conns needs --http")
	}
	if opts.HTTPMaxConns < 1 {
		return usageErrorf("leave it out for 512, or give a larger number", "--http-max-conns %d: want 1 or more", opts.HTTPMaxConns)
	}
	var ofrepTokens *ofrep.Tokens
	if opts.OFREPTokens != "" {
		var err error
		if ofrepTokens, err = ofrep.ReadTokensFile(opts.OFREPTokens); err != nil {
			return &UsageError{Err: err, Hint: tokensHint(err, "one NAMESPACE TOKEN per line (docs/FLAGS.md, \"Other languages\")")}
		}
	}
	var apiTokens []web.Token
	if opts.APITokens != "" {
		f, err := os.Open(opts.APITokens)
		if err != nil {
			return &UsageError{Err: fmt.Errorf("--api-tokens: %w", err), Hint: "give a file of NAME NAMESPACES SHA256 lines (docs/CHANGING.md)"}
		}
		apiTokens, err = web.ReadTokens(f)
		f.Close()
		if err != nil {
			return &UsageError{Err: fmt.Errorf("--api-tokens %s: %w", opts.APITokens, err), Hint: "one token a line: NAME NAMESPACES SHA256 (docs/CHANGING.md)"}
		}
	}
	if opts.OperatorToken == "" {
		opts.OperatorToken = env.Getenv("CUECAST_OPERATOR_TOKEN")
	}
	if opts.WebhookSecret == "" {
		opts.WebhookSecret = env.Getenv("CUECAST_WEBHOOK_SECRET")
	}
	if opts.Prometheus == "" {
		opts.Prometheus = env.Getenv("CUECAST_PROMETHEUS_URL")
	}
	if err := checkPrometheusTimeout(opts.PrometheusTimeout); err != nil {
		return err
	}
	if opts.InlineLimit == 0 || opts.InlineLimit < -1 || opts.InlineLimit > distributor.ChunkThreshold {
		return usageErrorf(fmt.Sprintf("use 1 to %d bytes, or -1 to never inline", distributor.ChunkThreshold), "--inline-limit %d: out of range", opts.InlineLimit)
	}
	if err := checkHeartbeat(opts.Heartbeat); err != nil {
		return err
	}
	if opts.Interval < 0 {
		return usageErrorf("use a poll interval like --interval 5s, or leave it out for the default", "--interval %s: want a positive duration", opts.Interval)
	}
	// Every input is checked before the data directory gets its first
	// file: a typo must not leave a key, a store and a trusted-keys file
	// behind.
	if err := checkHostPort("listen", opts.Listen); err != nil {
		return err
	}
	if opts.HTTP != "" {
		if err := checkHostPort("http", opts.HTTP); err != nil {
			return err
		}
		if _, err := hostcheck.ForBind(opts.HTTP, opts.HTTPHosts); err != nil {
			return &UsageError{Err: fmt.Errorf("--http-host: %w", err), Hint: "give the name a browser or proxy sends as Host, like --http-host cuecast.example"}
		}
	}
	host, err := checkEmbedded(opts, log)
	if err != nil {
		return err
	}
	ext, err := opts.Scale.external(env)
	if err != nil {
		return err
	}
	gitAuth, gitCA, err := opts.Git.auth(opts.Repo, env.Getenv)
	if err != nil {
		return err
	}
	if err := tailer.CheckRepo(ctx, tailer.Config{Repo: opts.Repo, Branch: opts.Branch, DataDir: opts.Data, Auth: gitAuth, CABundle: gitCA, StartAt: opts.StartAt}); err != nil {
		return repoError(err, opts.Git.describe(env.Getenv))
	}
	setter, err := serveMutator(env, opts, apiTokens)
	if err != nil {
		return err
	}
	key, trustFile, err := serveKey(opts)
	if err != nil {
		return err
	}
	emb, err := embeddedSecurity(opts, host)
	if err != nil {
		return err
	}
	var analyzer rollout.Analyzer
	if opts.Prometheus != "" {
		p, err := analysis.New(opts.Prometheus, analysis.Options{Timeout: opts.PrometheusTimeout})
		if err != nil {
			return &UsageError{Err: err, Hint: "pass --prometheus http://prometheus:9090"}
		}
		analyzer = p
	}
	p, err := pipeline.Start(ctx, pipeline.Config{
		Repo:            opts.Repo,
		Branch:          opts.Branch,
		GitAuth:         gitAuth,
		GitCABundle:     gitCA,
		DataDir:         opts.Data,
		SigningKey:      key,
		Listen:          opts.Listen,
		EmbeddedConfig:  emb.conf,
		EmbeddedOptions: emb.connect,
		Interval:        opts.Interval,
		StartAt:         opts.StartAt,
		Policies:        pipeline.ManifestPolicies(opts.Repo, opts.Branch, opts.Data),
		Analyzer:        analyzer,
		Logger:          log,
		HTTP:            opts.HTTP,
		HTTPHosts:       opts.HTTPHosts,
		HTTPMaxConns:    opts.HTTPMaxConns,
		OperatorToken:   opts.OperatorToken,
		APITokens:       apiTokens,
		Mutator:         setter,
		WebhookSecret:   opts.WebhookSecret,
		OFREPTokens:     ofrepTokens,
		OFREP:           opts.OFREP,
		InlineLimit:     opts.InlineLimit,
		Heartbeat:       opts.Heartbeat,
		External:        ext,
	})
	if err != nil {
		if ctx.Err() != nil {
			// Stopped (SIGTERM, ^C) while starting: as clean a stop as one
			// after, so that a supervisor asked to stop serve during a long
			// start does not count it as a failure.
			log.Info("stopped while starting", "err", err)
			return nil
		}
		return repoError(err, opts.Git.describe(env.Getenv))
	}
	defer p.Close()
	if len(opts.Namespaces) > 0 {
		p.Starting("creating the namespaces' mirrors")
	}
	if err := emb.mirrors(ctx, p.NC, opts.Namespaces); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// The lines below tell people and supervisors where to go: the
	// operations server answers before they are written.
	p.OpenHTTP()
	// The "serving" record is the JSON form of the line after it.
	log.Info("serving", "nats", p.ClientURL(), "repo", (tailer.Config{Repo: opts.Repo}).Shown(), "branch", opts.Branch, "data", opts.Data, "public_key", p.PublicKey, "trusted_keys", trustFile)
	ann := announcer{env: env, log: log}
	if !ann.json() {
		fmt.Fprintf(env.IO.ErrOut, "cuecast serve: NATS at %s; signing with %s; services trust the keys in %s (--trusted-keys-file; 'cuecast keys --data %s' prints them)\n",
			p.ClientURL(), p.PublicKey, trustFile, opts.Data)
	}
	emb.announceLogin(ann, p.ClientURL())
	if addr := p.HTTPAddr(); addr != "" {
		mode := "read-only"
		if opts.OperatorToken != "" {
			mode = "operator actions enabled"
		}
		ann.say(fmt.Sprintf("cuecast serve: dashboard at http://%s/ (%s), metrics at http://%s/metrics", addr, mode, addr),
			"dashboard", "url", "http://"+addr+"/", "metrics", "http://"+addr+"/metrics", "operator_actions", opts.OperatorToken != "")
		switch {
		case p.OFREPAddr() != "":
			ann.say(fmt.Sprintf("cuecast serve: OFREP at http://%s/ofrep/v1/ (tokens from %s; nothing else there)", p.OFREPAddr(), opts.OFREPTokens),
				"ofrep", "url", "http://"+p.OFREPAddr()+"/ofrep/v1/", "tokens_file", opts.OFREPTokens)
		case ofrepTokens != nil:
			ann.say(fmt.Sprintf("cuecast serve: OFREP at http://%s/ofrep/v1/ (tokens from %s)", addr, opts.OFREPTokens),
				"ofrep", "url", "http://"+addr+"/ofrep/v1/", "tokens_file", opts.OFREPTokens)
			ann.warn(fmt.Sprintf("cuecast serve: warning: OFREP callers reaching --http %s read every config and flag set without a token (/api/...); serve OFREP apart with --ofrep ADDR", addr),
				"OFREP shares --http: its callers read every config and flag set without a token (/api/...); serve OFREP apart with --ofrep ADDR", "http", addr)
		}
	}
	if err := p.Run(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// announcer tells people and supervisors where serve is: a line of text
// on stderr or, with --log-format json, a log record in its place, so that
// stderr stays one JSON object a line (docs/OPERATIONS.md).
type announcer struct {
	env *Env
	log *slog.Logger
}

func (a announcer) json() bool { return a.env.LogFormat == "json" }

// say writes text, or the record msg with attrs. Neither may hold a secret:
// a file holding one is named, never read.
func (a announcer) say(text, msg string, attrs ...any) {
	if a.json() {
		a.log.Info(msg, attrs...)
		return
	}
	fmt.Fprintln(a.env.IO.ErrOut, text)
}

// warn is say for a warning: a record at level WARN.
func (a announcer) warn(text, msg string, attrs ...any) {
	if a.json() {
		a.log.Warn(msg, attrs...)
		return
	}
	fmt.Fprintln(a.env.IO.ErrOut, text)
}

// serveKey loads (or creates) the signing key and lists its public half in
// the trusted-keys file, before anything is signed: a service given the file
// as soon as serve runs finds the key in it. The keys already listed stay
// (a rotation's other key); `cuecast keys retire` removes one.
func serveKey(opts *ServeOptions) (nkeys.KeyPair, string, error) {
	path := opts.SigningKey
	if path == "" {
		path = filepath.Join(opts.Data, "signing.nk")
	}
	key, _, err := distributor.LoadOrCreateKey(path)
	if err != nil {
		return nil, "", fmt.Errorf("serve: %w", err)
	}
	pub, err := key.PublicKey()
	if err != nil {
		return nil, "", fmt.Errorf("serve: signing key %s: %w", path, err)
	}
	trustFile := filepath.Join(opts.Data, distributor.TrustedKeysFile)
	if _, err := distributor.TrustKey(trustFile, pub); err != nil {
		return nil, "", fmt.Errorf("serve: %w", err)
	}
	return key, trustFile, nil
}

// repoError turns the tailer's complaints about the repository into usage
// errors (exit 2): they are fixed by pointing cuecast elsewhere, not retried.
func repoError(err error, creds string) error {
	switch {
	case errors.Is(err, tailer.ErrNotRepo):
		return &UsageError{Err: err, Hint: "point --repo at a Git work tree, a bare repository or a clone URL"}
	case errors.Is(err, tailer.ErrNoBranch):
		return &UsageError{Err: err, Hint: "pass --branch with a branch that exists"}
	case errors.Is(err, tailer.ErrAuth):
		return &UsageError{Err: err, Hint: "the repository refused " + creds + ": check the token's or deploy key's access to it"}
	case errors.Is(err, tailer.ErrHostKey):
		return &UsageError{Err: err, Hint: "the server's host key is not in --git-known-hosts: add it (ssh-keyscan HOST), after checking it against what the Git host publishes"}
	case errors.Is(err, tailer.ErrNoCommit):
		return &UsageError{Err: err, Hint: "name a commit of the branch, by its hash or a prefix of one (git log shows them)"}
	case errors.Is(err, tailer.ErrInvalidConfig):
		return &UsageError{Err: err}
	}
	return err
}

// checkHostPort refuses an address flag that is not HOST:PORT with a port
// from 0 to 65535, before anything tries to listen on it (a listener's own
// error would blame another process).
func checkHostPort(flag, addr string) error {
	hint := fmt.Sprintf("give --%s HOST:PORT, like 127.0.0.1:4222 (port 0: any free port)", flag)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf(hint, "--%s %s: want HOST:PORT", flag, addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usageErrorf(hint, "--%s %s: port %q is not a number from 0 to 65535", flag, addr, port)
	}
	return nil
}

// serveMutator is the mutator behind the set API (docs/CHANGING.md): over
// a local --repo, when a token enables the API, pushing and opening pull
// requests as cuecast set does ($GITHUB_TOKEN, $GITHUB_REPOSITORY,
// $GITHUB_API_URL, serve's Git credentials); nil otherwise.
func serveMutator(env *Env, opts *ServeOptions, tokens []web.Token) (web.Setter, error) {
	if opts.HTTP == "" || (opts.OperatorToken == "" && len(tokens) == 0) || (tailer.Config{Repo: opts.Repo}).Remote() {
		return nil, nil
	}
	so := &SetOptions{Repo: opts.Repo, Remote: "origin", Git: opts.Git}
	githubFromEnv(env, &so.Token, &so.GitHubRepo, &so.APIURL)
	r, err := openRepoDir(opts.Repo)
	if err != nil {
		return nil, err
	}
	mo, err := so.mutatorOptions(env, r, false)
	if err != nil {
		return nil, err
	}
	mo.Logger = env.Logger()
	return mutator.New(opts.Repo, mo), nil
}
