// Package pipeline assembles the parts that `cuecast serve` runs in one
// process: the embedded NATS server, the distributor and the tailer. The demo
// and the end-to-end tests start exactly the same assembly.
package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/hostcheck"
	"github.com/cuecast/cuecast/internal/httpsrv"
	"github.com/cuecast/cuecast/internal/leader"
	"github.com/cuecast/cuecast/internal/metrics"
	"github.com/cuecast/cuecast/internal/natsserver"
	"github.com/cuecast/cuecast/internal/web"
	"github.com/cuecast/cuecast/mutator"
	"github.com/cuecast/cuecast/tailer"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Config configures one pipeline.
type Config struct {
	// Repo and Branch are what the tailer follows.
	Repo   string
	Branch string
	// GitAuth and GitCABundle are tailer.Config's Auth and CABundle: how a
	// private remote Repo is read.
	GitAuth     transport.AuthMethod
	GitCABundle []byte
	// DataDir holds the JetStream store, the signing key and remote clones.
	DataDir string
	// SigningKey signs every version and pointer; nil: the seed in
	// DataDir/signing.nk, created on first start. (serve loads it itself, from
	// --signing-key, to write the trusted-keys file first.)
	SigningKey nkeys.KeyPair
	// Listen is the embedded server's client address; port 0 picks one.
	Listen string
	// EmbeddedConfig, when set, is the nats-server configuration the
	// embedded server runs with (serve --secure: accounts, users, TLS), and
	// EmbeddedOptions log the pipeline's own connection in (the distributor).
	EmbeddedConfig  string
	EmbeddedOptions []nats.Option
	// Interval is the tailer's poll interval (zero: its default).
	Interval time.Duration
	// StartAt is the first commit to process on an empty data directory.
	StartAt string
	// Policies decides how each new version rolls out. Nil gives every
	// config the default policy (one stage, everyone at once); serve passes
	// ManifestPolicies, the manifest's per-namespace stages.
	Policies rollout.Policies
	// Analyzer measures the metrics of stages with an analysis
	// (rollout.Options.Analyzer); nil: such a stage halts after its
	// max_errors evaluations, as with Prometheus down.
	Analyzer rollout.Analyzer
	Logger   *slog.Logger

	// HTTP, when set, is the address of the operations server (internal/web):
	// /metrics, /healthz, /readyz, the dashboard and /hooks/github. Port 0
	// picks one; Pipeline.HTTPAddr says which.
	HTTP string
	// HTTPHosts are the names besides its address that the operations
	// server answers to (hostcheck.ForBind): on a loopback HTTP, any other
	// Host is refused, against DNS rebinding.
	HTTPHosts []string
	// HTTPMaxConns is how many connections HTTP, and OFREP, each serve at
	// once (httpsrv.Limits.MaxConns); 0: httpsrv.DefaultMaxConns.
	HTTPMaxConns int
	// OperatorToken enables the dashboard's rollout actions for requests
	// bearing it; empty leaves the dashboard read-only.
	OperatorToken string
	// WebhookSecret verifies GitHub webhooks at /hooks/github; empty rejects
	// them all.
	WebhookSecret string
	// OFREPTokens serves OFREP on the operations server (web.Options).
	OFREPTokens *ofrep.Tokens
	// OFREP, with OFREPTokens and HTTP, is the address of a listener that
	// serves OFREP alone (web.NewOFREPFront), instead of the operations
	// server: its callers do not reach the dashboard's reads. The same
	// Host check as HTTP's (HTTPHosts). Pipeline.OFREPAddr says which.
	OFREP string
	// APITokens may change their namespaces' configs through the
	// operations server's set API, as OperatorToken may every config's;
	// either enables the API, over a mutator of a local Repo
	// (docs/CHANGING.md).
	APITokens []web.Token
	// Mutator performs the set API's changes; nil: one over Repo, when it
	// is local, with no remote credentials (serve passes its own).
	Mutator web.Setter
	// SampleInterval is how often the operations server samples the fleet
	// (zero: 1s).
	SampleInterval time.Duration
	// InlineLimit is distributor.Options.InlineLimit (zero: its default).
	InlineLimit int
	// Heartbeat is how often instances report when nothing changes
	// (distributor.Options.Heartbeat and the controller's; zero: 15s).
	Heartbeat time.Duration
	// MaxFileStore caps the embedded server's JetStream store in bytes
	// (zero: the server's default share of the disk); tests use it to run
	// out of space without filling a disk.
	MaxFileStore int64

	// External NATS and replicated serve (docs/SCALING.md): see external.go.
	External
}

// Pipeline is a running assembly. Close stops it.
type Pipeline struct {
	Server      *server.Server
	NC          *nats.Conn
	Distributor *distributor.Distributor
	Tailer      *tailer.Tailer
	// Rollout is the controller moving cohort pointers stage by stage; it is
	// the tailer's Deployer.
	Rollout *rollout.Controller
	// PublicKey verifies every version and pointer this pipeline signs.
	PublicKey string
	// Metrics and Web are set when Config.HTTP is.
	Metrics *metrics.Metrics
	Web     *web.Server
	httpLn  net.Listener
	// ofrepLn and ofrepFront serve Config.OFREP, beside httpLn and front
	// and opened and ended with them; nil without it.
	ofrepLn    net.Listener
	ofrepFront *web.Front
	// front answers on httpLn from the start (web.Front); OpenHTTP (or
	// Run) opens it to Web. frontStop and frontDone end it in Close.
	front     *web.Front
	frontOpen sync.Once
	frontStop context.CancelFunc
	frontDone chan struct{}
	log       *slog.Logger
	// Lease elects the one pipeline that runs the tailer and the rollout
	// controller among all on one stream; leaseID names this one in it.
	Lease   *leader.Lease
	leaseID string
	url     string
	// lock holds the data directory for this process.
	lock *os.File
	// storeDir is the embedded server's JetStream directory.
	storeDir string
}

// ErrDataDirLocked: another process runs a pipeline over the data directory.
var ErrDataDirLocked = errors.New("data directory locked")

// Start brings the parts up in dependency order and checks the repository
// before anything runs. Errors from the tailer about the repository wrap
// tailer.ErrNotRepo or tailer.ErrNoBranch, so callers can tell bad input from
// a failure.
func Start(ctx context.Context, cfg Config) (_ *Pipeline, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("start pipeline: a data directory is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("start pipeline: data directory: %w", err)
	}
	if err := ignoreInGit(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("start pipeline: data directory: %w", err)
	}
	p := &Pipeline{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("start pipeline: %w", err)
	}
	if cfg.OFREP != "" && cfg.HTTP == "" {
		// The operations server samples the flag sets the listener serves.
		return nil, errors.New("start pipeline: an OFREP listener needs the operations server (HTTP)")
	}
	if cfg.HTTP != "" {
		// Bound first, so that a busy port fails at once, naming it.
		hosts, err := hostcheck.ForBind(cfg.HTTP, cfg.HTTPHosts)
		if err != nil {
			return nil, fmt.Errorf("start pipeline: --http: %w", err)
		}
		var ofrepHosts *hostcheck.Allow
		if cfg.OFREP != "" {
			if cfg.OFREPTokens == nil {
				return nil, errors.New("start pipeline: an OFREP listener needs OFREP tokens")
			}
			if ofrepHosts, err = hostcheck.ForBind(cfg.OFREP, cfg.HTTPHosts); err != nil {
				return nil, fmt.Errorf("start pipeline: --ofrep: %w", err)
			}
		}
		if p.httpLn, err = net.Listen("tcp", cfg.HTTP); err != nil {
			return nil, fmt.Errorf("start pipeline: --http %s: port not available (another process listens on it?): %w", cfg.HTTP, err)
		}
		if cfg.OFREP != "" {
			if p.ofrepLn, err = net.Listen("tcp", cfg.OFREP); err != nil {
				p.httpLn.Close()
				return nil, fmt.Errorf("start pipeline: --ofrep %s: port not available (another process listens on it?): %w", cfg.OFREP, err)
			}
		}
		p.serveFront(ctx, cfg.Logger, hosts, ofrepHosts, httpsrv.Limits{MaxConns: cfg.HTTPMaxConns})
	}
	key := cfg.SigningKey
	if key == nil {
		if key, err = loadOrCreateKey(filepath.Join(cfg.DataDir, "signing.nk")); err != nil {
			return nil, err
		}
	}
	if p.PublicKey, err = key.PublicKey(); err != nil {
		return nil, fmt.Errorf("start pipeline: signing key: %w", err)
	}
	if cfg.HTTP != "" {
		// The parts log through the metrics' tap, which counts the events.
		p.Metrics = metrics.New(metrics.Options{})
		cfg.Logger = slog.New(p.Metrics.LogHandler(cfg.Logger.Handler()))
	}
	p.log = cfg.Logger
	if cfg.NATS == "" {
		p.Starting("reading back the embedded NATS server's JetStream store")
	} else {
		p.Starting("connecting to NATS")
	}
	if err := p.connect(ctx, cfg); err != nil {
		return nil, err
	}
	p.Starting("opening the streams")
	p.Distributor, err = distributor.New(ctx, p.NC, distributor.Options{SigningKey: key, Logger: cfg.Logger, Replicas: cfg.Replicas, InlineLimit: cfg.InlineLimit, Heartbeat: cfg.Heartbeat})
	if err != nil {
		return nil, fmt.Errorf("start pipeline: %w", err)
	}
	pol := cfg.Policies
	if pol == nil {
		pol = rollout.Static{}
	}
	p.Rollout, err = rollout.New(ctx, p.NC, p.Distributor, pol, rollout.Options{Logger: cfg.Logger, Replicas: cfg.Replicas, Heartbeat: cfg.Heartbeat, Analyzer: cfg.Analyzer})
	if err != nil {
		return nil, fmt.Errorf("start pipeline: %w", err)
	}
	js, err := jetstream.New(p.NC)
	if err != nil {
		return nil, fmt.Errorf("start pipeline: jetstream: %w", err)
	}
	var store metrics.Store = p.Distributor
	if p.Metrics != nil {
		store = p.Metrics.Publisher(p.Distributor)
	}
	tcfg := tailer.Config{
		Repo:     cfg.Repo,
		Branch:   cfg.Branch,
		Auth:     cfg.GitAuth,
		CABundle: cfg.GitCABundle,
		Interval: cfg.Interval,
		StartAt:  cfg.StartAt,
		DataDir:  cfg.DataDir, // a remote repository is cloned into DataDir/repos/<ID>
		Logger:   cfg.Logger,
		Replicas: cfg.Replicas,
	}
	// ManifestPolicies take each commit's manifest from the tailer's compile.
	manifests, _ := pol.(tailer.ManifestRecorder)
	var dep metrics.Deployer = deployer{p.Rollout}
	if p.Metrics != nil {
		dep = p.Metrics.Deployer(dep)
	}
	ho := newHandoff(store, dep, p.NC, manifests)
	p.Starting("opening the repository")
	p.Tailer, err = tailer.New(ctx, tcfg, js, ho, ho)
	if err != nil {
		return nil, err
	}
	if p.Metrics != nil {
		if err := p.registerIntegrity(); err != nil {
			return nil, err
		}
	}
	p.Starting("joining the lease")
	if err := p.startLease(ctx, cfg, js); err != nil {
		return nil, err
	}
	if cfg.HTTP != "" {
		// What the 503s say from here until OpenHTTP, unless the caller
		// has more to do first and says so (Starting).
		p.Starting("opening the operations server")
		if err := p.startWeb(ctx, cfg, tcfg, js); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// startWeb builds the operations server and binds its address, so that a
// busy port fails Start rather than Run.
func (p *Pipeline) startWeb(ctx context.Context, cfg Config, tcfg tailer.Config, js jetstream.JetStream) error {
	lagDir, lagRef := tcfg.GitDir(), plumbing.NewBranchReferenceName(cmp.Or(tcfg.Branch, "main"))
	if tcfg.Remote() {
		// The tailer's clone: the remote's branch as of its last fetch.
		lagRef = plumbing.NewRemoteReferenceName("origin", cmp.Or(tcfg.Branch, "main"))
	}
	setter := cfg.Mutator
	if setter == nil && (cfg.OperatorToken != "" || len(cfg.APITokens) > 0) && !tcfg.Remote() {
		setter = mutator.New(cfg.Repo, mutator.Options{Logger: cfg.Logger})
	}
	srv, err := web.New(web.Options{
		Mutator:       setter,
		Tokens:        cfg.APITokens,
		Fleet:         p.Distributor,
		Regions:       p.Distributor,
		Tailer:        p.Tailer,
		Rollouts:      p.Rollout,
		Operator:      web.ControllerOperator(p.Rollout),
		ReportFeed:    web.NATSReports(p.NC),
		OperatorToken: cfg.OperatorToken,
		OFREPTokens:   cfg.OFREPTokens,
		OFREPListener: cfg.OFREP != "",
		Lag: func(ctx context.Context, cursor, from string) (int, error) {
			return metrics.BranchLag(ctx, lagDir, lagRef, cursor, from)
		},
		Metrics:   p.Metrics,
		Webhook:   tailer.WebhookHandler(cfg.WebhookSecret, p.Tailer),
		CommitURL: web.GitHubCommitURL(cfg.Repo),
		Ready: func(ctx context.Context) error {
			if !p.NC.IsConnected() {
				return errors.New("NATS connection " + p.NC.Status().String())
			}
			if _, err := js.AccountInfo(ctx); err != nil {
				return fmt.Errorf("JetStream: %w", err)
			}
			if err := p.Tailer.Inconsistent(); err != nil {
				return err
			}
			return p.spaceLeft(ctx, js)
		},
		Interval: cfg.SampleInterval,
		Logger:   cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("start pipeline: %w", err)
	}
	p.Web = srv
	return nil
}

// serveFront answers on the operations server's address from now until
// Close (web.Front): while Start works, /healthz 200 and every other path
// 503 saying what it waits for (starting); from Run on, the Server. Both
// listeners are bounded by lim.
func (p *Pipeline) serveFront(ctx context.Context, log *slog.Logger, hosts, ofrepHosts *hostcheck.Allow, lim httpsrv.Limits) {
	// Close ends it, not the end of Start's ctx: the server answers as long
	// as the pipeline is up. Its requests' contexts end with Close's cancel,
	// so that the dashboard's event streams end at once.
	ctx, p.frontStop = context.WithCancel(context.WithoutCancel(ctx))
	p.front, p.frontDone = web.NewFront(log, hosts), make(chan struct{})
	p.front.Limit(lim)
	if p.ofrepLn != nil {
		p.ofrepFront = web.NewOFREPFront(log, ofrepHosts)
		p.ofrepFront.Limit(lim)
	}
	go func() {
		defer close(p.frontDone)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := p.front.Serve(ctx, p.httpLn); err != nil {
				log.Error("http server stopped", "err", err)
			}
		})
		if p.ofrepFront != nil {
			wg.Go(func() {
				if err := p.ofrepFront.Serve(ctx, p.ofrepLn); err != nil {
					log.Error("OFREP server stopped", "err", err)
				}
			})
		}
		wg.Wait()
	}()
}

// Starting says what the process waits for now, on the operations
// server's 503s until OpenHTTP: Start's own steps, then any a caller
// takes before it opens the server (serve's namespace mirrors).
func (p *Pipeline) Starting(what string) {
	if p.front != nil {
		p.front.Starting(what)
	}
	if p.ofrepFront != nil {
		p.ofrepFront.Starting(what)
	}
}

// HTTPAddr is the operations server's address, "" without one.
func (p *Pipeline) HTTPAddr() string {
	if p.httpLn == nil {
		return ""
	}
	return p.httpLn.Addr().String()
}

// OFREPAddr is the OFREP listener's address (Config.OFREP), "" without one.
func (p *Pipeline) OFREPAddr() string {
	if p.ofrepLn == nil {
		return ""
	}
	return p.ofrepLn.Addr().String()
}

// ClientURL is where services connect: for an embedded server listening
// on every interface, its loopback address (natsserver.ClientURL).
func (p *Pipeline) ClientURL() string {
	if p.Server == nil {
		return p.url
	}
	return natsserver.ClientURL(p.Server)
}

// OpenHTTP hands every request to the operations server from now on;
// until then it answers 503 "not ready: starting". A caller that says
// where the dashboard is (serve) opens it first, so that whoever reads
// the address and asks at once is answered; Run opens it if no one has.
func (p *Pipeline) OpenHTTP() {
	if p.Web != nil {
		p.frontOpen.Do(func() {
			p.front.Open(p.Web)
			if p.ofrepFront != nil {
				p.ofrepFront.Open(p.Web)
			}
		})
	}
}

// Run follows the branch until ctx is cancelled.
func (p *Pipeline) Run(ctx context.Context) error {
	if p.Web != nil {
		p.OpenHTTP()
		// The first fleet sample before the tailer starts: the metrics learn
		// which commits were rejected before this process.
		p.Web.Sample(ctx)
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { p.Web.Run(ctx) })
		defer wg.Wait()
		defer cancel()
	}
	if p.Server != nil {
		// A full disk leaves the embedded server's store refusing writes
		// until it is reopened: once there is space again, stop, so that
		// the supervisor starts serve again (see watchStore).
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			if err := p.watchStore(ctx); err != nil {
				cancel(err)
			}
		}()
		err := p.runLeased(ctx)
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		return err
	}
	return p.runLeased(ctx)
}

// runLeased runs the active parts during each term of the lease. A term
// starts by claiming the writer fence with its token, so from then on the
// store refuses the versions of any earlier holder still running, and only
// then reads the tailer's state. A writer fenced out by a later term (its
// lease lost without its noticing yet) stops tailing and campaigns again;
// its next term reads everything afresh.
func (p *Pipeline) runLeased(ctx context.Context) error {
	return p.Lease.Run(ctx, func(ctx context.Context, term leader.Term) error {
		if err := p.Distributor.ClaimFence(ctx, term.Revision, term.ID); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.log.Warn("lease term without the writer fence; campaigning again", "revision", term.Revision, "err", err)
			// Not at once: a store that fails the claim fails it again.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			return nil
		}
		err := p.runActive(ctx)
		if errors.Is(err, cuecast.ErrFenced) {
			p.log.Warn("fenced out: a later lease term writes versions; stopped tailing, campaigning again", "revision", term.Revision, "err", err)
			return nil
		}
		return err
	})
}

// runActive runs the tailer and the rollout controller until ctx is
// cancelled: the whole time in a single serve, while the lease is held in a
// replica.
func (p *Pipeline) runActive(ctx context.Context) error {
	// The rollout controller runs beside the tailer; when either stops with
	// an error, the other is stopped too.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// After a signing-key switch, the stored pointers move onto the new key
	// before anything else writes one (docs/OPERATIONS.md, "Rotating the
	// signing key"); a no-op otherwise. A failure is retried at the next
	// lease term or restart, and costs only services trusting the new key
	// alone a start from those pointers, so it is logged.
	if _, err := p.Distributor.ResignPointers(ctx); err != nil {
		p.log.Warn("re-sign pointers with the current key", "err", err)
	}
	ctlErr := make(chan error, 1)
	go func() {
		err := p.Rollout.Run(ctx)
		if err != nil {
			stop()
		}
		ctlErr <- err
	}()
	err := p.Tailer.Run(ctx)
	stop()
	if cerr := <-ctlErr; cerr != nil {
		return fmt.Errorf("rollout controller: %w", cerr)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Close stops the parts in reverse order; safe on a half-started pipeline.
func (p *Pipeline) Close() {
	if p.front != nil {
		p.frontStop()
		<-p.frontDone // the server closes httpLn
	}
	if p.NC != nil {
		p.NC.Close()
	}
	if p.Server != nil {
		p.Server.Shutdown()
		p.Server.WaitForShutdown()
	}
	if p.lock != nil {
		unlockDataDir(p.lock)
	}
}

// loadOrCreateKey reads the ed25519 signing seed, creating it on first start.
// The seed is a secret: the file is written 0600 and never logged.
func loadOrCreateKey(path string) (nkeys.KeyPair, error) {
	seed, err := os.ReadFile(path)
	switch {
	case err == nil:
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			return nil, fmt.Errorf("signing key %s: %w", path, err)
		}
		return kp, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	seed, err = kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		return nil, fmt.Errorf("write signing key %s: %w", path, err)
	}
	return kp, nil
}

// ignoreInGit writes a .gitignore of "*" into the data directory, if it has
// none: serve's defaults (--repo . and --data .cuecast) put it in the
// repo's work tree, where `git add -A` would commit the signing key. Git
// reads a directory's own .gitignore, so the directory ignores itself
// wherever it is, as Python's virtual environments do.
func ignoreInGit(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, ".gitignore"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString("# cuecast serve's data: the signing key, the NATS store. Never commit it.\n*\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
