package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/hostcheck"
	"github.com/cuecast/cuecast/internal/redact"
)

// AgentOptions are the flags of `cuecast agent`.
type AgentOptions struct {
	Configs     []string
	Dir         string
	Exec        string
	Signal      string
	ExecTimeout time.Duration
	Quiet       time.Duration
	// OFREP and OFREPTokens: serve the flag sets kept over OFREP
	// (agent_ofrep.go).
	OFREP       string
	OFREPTokens string
	// OFREPInsecureLocal accepts a TCP --ofrep without tokens: any user
	// of the host reads every flag set the agent keeps.
	OFREPInsecureLocal bool
	// Metrics is where agent serves /metrics with cuecast_config_info
	// (agent_metrics.go); empty: nowhere.
	Metrics string
	// MetricsHosts are more names --metrics answers to (hostcheck.ForBind).
	MetricsHosts []string
	serviceFlags
}

func newAgentCmd(env *Env, runF func(*cobra.Command, *AgentOptions) error) *cobra.Command {
	opts := &AgentOptions{}
	cmd := &cobra.Command{
		Use:   "agent --instance ID --config PATH... --dir OUT",
		Short: "Keep configs as files for services not written in Go, and tell them on change",
		Long: `Agent is the client library as a sidecar. For each --config it keeps the applied
version's JSON in OUT/<config path>.json, replaced by an atomic rename so the service
never reads half a file, and removes the file when the config is deleted on main.
Last-known-good copies live in OUT/.cuecast/, so the files are there at start even
while NATS is down.

OUT must be a directory of the agent's user that group and others cannot write
(made 0755 when missing: on a volume others may write, like a Kubernetes emptyDir,
name a subdirectory for the agent to make, like --dir /config/out), and so must each
directory the agent writes in under it; otherwise whoever can write there could
replace what the service reads. A --dir that is a symlink is followed once, at start,
and said; one another user owns is refused. Such a directory stops the agent at
start (exit 2, naming it, its owner and mode); met later, the write is refused.
Nothing is created, written or removed outside OUT, whatever symlinks are in it.
A write that fails (that, a full or read-only disk) is said on stderr and makes the
instance unhealthy, and its reports say why in their last error (the file named
relative to OUT), which cuecast status shows; the agent keeps running, the old file
stays, and the write is retried (after 1s, doubling to 10s) until it is made. At
start the agent removes the temporary files of a write cut short
(OUT/<namespace>/.tmp-*, OUT/.cuecast/<namespace>/.*.lkg.tmp-*).

After a change (changes arriving together are coalesced) it runs --exec through
sh -c, with CUECAST_CONFIG, CUECAST_VERSION and CUECAST_FILE (the file written,
OUT/<config path>.json, for a variant too) set to the last change, and the agent's
environment without the variables cuecast reads secrets from ($CUECAST_NATS_PASSWORD,
$CUECAST_GIT_TOKEN, $GITHUB_TOKEN and the like, and $NATS_URL when it holds a
password or a token); or it sends --signal to a process, like consul-template. At
--exec-timeout the command and every process it started are killed. A failing or
timed-out command is said on stderr and makes the instance report itself unhealthy
until the next success, so a staged rollout halts on it; the reports' last error
says why ("--exec timed out after 30s", "--exec failed: exit status 1"), without
the command, which may hold a secret.

Only content signed by a trusted key is written: pass serve's <data>/trusted-keys
as --trusted-keys-file (` + "`cuecast keys`" + ` prints it); agent refuses to start
without trusted keys unless told --insecure-skip-verify.

A config with variants (docs/VARIANTS.md) is kept in the variant of this
instance's dimension values, --dim env=prod (repeatable) or --variant
env=prod,region=eu, still as OUT/<config path>.json; the printed line's config
names the variant. A value the config uses that is not given, or a combination
that is not one of its variants, is an error (exit 2), never a default. When the
config's variants change (it gains variants, or the variant kept is removed), agent
watches it again to pick the instance's variant, and says so on stderr.

Each file written is printed as one JSON line on stdout.

With --ofrep 127.0.0.1:PORT (or unix:PATH) the flag sets among the configs
are also served over OpenFeature's remote evaluation protocol (OFREP), from
this host's verified copy, to any OpenFeature SDK: a flag's key is
<config path>/<flag> (docs/FLAGS.md, "Other languages"). --ofrep-tokens FILE
(lines "NAMESPACE TOKEN", a file other users may not read: mode 600 or 640)
requires a token that reads the flag's namespace.
Every user of the host can connect to a loopback port, so a TCP --ofrep needs
--ofrep-tokens, or --ofrep-insecure-local to let any local user read every
flag set the agent keeps. A Unix socket is created with mode 0660 (never
open wider, even while it is made): the agent's user and the socket's group
(the agent's group, or the directory's if it is set-group-ID) connect.

With --metrics ADDR the agent serves /metrics with cuecast_config_info
(docs/ROLLOUT.md, "Analysis"). On a loopback ADDR it answers only requests
whose Host is a loopback address, localhost or a --metrics-host name; any
other Host gets 421, so that a web page whose name is re-resolved to
127.0.0.1 (DNS rebinding) reads no config name or version.`,
		Example: `  cuecast agent --instance web-1 --config payments/checkout --config payments/refunds \
      --dir /etc/app/config --exec 'systemctl reload app' --trusted-keys-file /etc/cuecast/trusted-keys
  cuecast agent --instance web-1 --config search/ranking --dir ./cfg --signal "$(cat app.pid):HUP" \
      --trusted-keys-file /etc/cuecast/trusted-keys`,
		RunE: func(c *cobra.Command, args []string) error {
			// It bounds --exec alone: given without it, it would be ignored.
			if c.Flags().Changed("exec-timeout") && opts.Exec == "" {
				return usageErrorf("add --exec, or drop --exec-timeout", "--exec-timeout needs --exec")
			}
			if err := opts.validateAgent(); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return agentRun(c.Context(), env, opts)
		},
	}
	cmd.Flags().StringArrayVar(&opts.Configs, "config", nil, "config path to keep as a file (repeatable)")
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "directory to write OUT/<config path>.json into")
	cmd.Flags().StringVar(&opts.Exec, "exec", "", "command to run (sh -c) after a change")
	cmd.Flags().StringVar(&opts.Signal, "signal", "", "PID:SIGNAL to send after a change, like 1234:HUP")
	cmd.Flags().DurationVar(&opts.ExecTimeout, "exec-timeout", 30*time.Second, "how long --exec may run; then it and the processes it started are killed")
	cmd.Flags().StringVar(&opts.OFREP, "ofrep", "", "serve the flag sets over OFREP at this loopback HOST:PORT or unix:PATH")
	cmd.Flags().StringVar(&opts.OFREPTokens, "ofrep-tokens", "", "file of NAMESPACE TOKEN lines, mode 600 or 640, that OFREP requests must carry one of")
	cmd.Flags().BoolVar(&opts.OFREPInsecureLocal, "ofrep-insecure-local", false, "serve a TCP --ofrep without tokens: any user of this host reads every flag set kept")
	cmd.Flags().StringVar(&opts.Metrics, "metrics", "", "address to serve /metrics on, with cuecast_config_info for joining the service's series to its version (docs/ROLLOUT.md, \"Analysis\")")
	cmd.Flags().StringArrayVar(&opts.MetricsHosts, "metrics-host", nil,
		"a name --metrics answers to besides its address (repeatable); on a loopback --metrics any other Host gets 421, against DNS rebinding")
	cmd.Flags().DurationVar(&opts.Quiet, "quiet", 100*time.Millisecond, "wait this long after a change for others before running --exec or --signal")
	opts.register(cmd.Flags(), env)
	return cmd
}

func (o *AgentOptions) validateAgent() error {
	if err := o.validate(); err != nil {
		return err
	}
	if len(o.Configs) == 0 {
		return usageErrorf("pass --config at least once", "no config to keep")
	}
	seen := map[string]bool{}
	for _, c := range o.Configs {
		if err := cuecast.ConfigPath(c).Validate(); err != nil {
			return &UsageError{Err: err, Hint: "name configs by their directory, like payments/checkout"}
		}
		if seen[c] {
			return usageErrorf("name each config once", "--config %s given twice", c)
		}
		seen[c] = true
		if o.NamespaceMirror && cuecast.ConfigPath(c).Namespace() != cuecast.ConfigPath(o.Configs[0]).Namespace() {
			return usageErrorf("run one agent per namespace with --namespace-mirror", "--namespace-mirror reads one namespace, but %s and %s differ", o.Configs[0], c)
		}
	}
	if o.Dir == "" {
		return usageErrorf("pass --dir", "no output directory")
	}
	if o.Exec != "" && o.Signal != "" {
		return usageErrorf("pass either --exec or --signal", "--exec and --signal both given")
	}
	// A zero timeout would fail every --exec at once; a negative quiet
	// would run as none.
	if err := positive("exec-timeout", o.ExecTimeout, "30s"); err != nil {
		return err
	}
	if o.Quiet < 0 {
		return usageErrorf("use a duration like --quiet 100ms, or 0s to run at once", "--quiet %s: want 0 or more", o.Quiet)
	}
	if o.Signal != "" {
		if _, _, err := parseSignal(o.Signal); err != nil {
			return err
		}
	}
	if err := o.validateOFREP(); err != nil {
		return err
	}
	if o.Metrics == "" && len(o.MetricsHosts) > 0 {
		return usageErrorf("add --metrics ADDR", "--metrics-host names the --metrics listener")
	}
	if o.Metrics != "" {
		if _, err := hostcheck.ForBind(o.Metrics, o.MetricsHosts); err != nil {
			return &UsageError{Err: fmt.Errorf("--metrics, --metrics-host: %w", err), Hint: "pass --metrics HOST:PORT, and the name Prometheus scrapes as Host, like --metrics-host node1.internal"}
		}
	}
	return o.validateTrust()
}

var signalNames = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "QUIT": syscall.SIGQUIT,
}

func parseSignal(s string) (int, syscall.Signal, error) {
	pidStr, name, ok := strings.Cut(s, ":")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 {
		return 0, 0, usageErrorf("write it as PID:SIGNAL, like 1234:HUP", "--signal %q: no process ID", s)
	}
	sig, ok := signalNames[strings.TrimPrefix(strings.ToUpper(name), "SIG")]
	if !ok {
		return 0, 0, usageErrorf("use HUP, USR1, USR2, INT, TERM or QUIT", "--signal %q: unknown signal %q", s, name)
	}
	return pid, sig, nil
}

// agent runs one watcher per config and one notifier for them all.
type agent struct {
	env  *Env
	opts *AgentOptions

	mu      sync.Mutex
	healthy bool
	// lastErr is why the last --exec or --signal failed, as the reports
	// carry it (notifyError.why).
	lastErr string
	last    client.Snapshot // the newest change, for --exec's environment
	kick    chan struct{}
	ofrep   *agentOFREP // nil without --ofrep

	out *outDir
	// writeMu orders the writes of keep and retryLoop, so a retry never
	// puts back an older version than the one just written.
	writeMu sync.Mutex
	// failed holds, per config, the write that failed (nil: only its
	// last-known-good directory could not be made), retried by
	// retryLoop; writeErr says why, for health and the reports (paths
	// relative to --dir). Both under mu.
	failed   map[cuecast.ConfigPath]*client.Snapshot
	writeErr map[cuecast.ConfigPath]string
}

// writtenLine is what agent prints per file it writes or removes.
type writtenLine struct {
	Config  cuecast.ConfigPath `json:"config"`
	Version uint64             `json:"version"`
	File    string             `json:"file"`
	Deleted bool               `json:"deleted,omitempty"`
}

func agentRun(ctx context.Context, env *Env, opts *AgentOptions) error {
	a := &agent{env: env, opts: opts, healthy: true, kick: make(chan struct{}, 1),
		failed: map[cuecast.ConfigPath]*client.Snapshot{}, writeErr: map[cuecast.ConfigPath]string{}}
	who := "agent " + opts.Instance
	var err error
	if a.out, err = openOutDir(opts.Dir, env.IO.ErrOut, who); err != nil {
		return err
	}
	defer a.out.close()
	var cfgs []cuecast.ConfigPath
	for _, c := range opts.Configs {
		cfgs = append(cfgs, cuecast.ConfigPath(c))
	}
	rewatch := newRewatchSignal(cfgs...)
	opts.rewatch = rewatch.notify
	if a.ofrep, err = a.startOFREP(); err != nil {
		return err
	}
	defer a.ofrep.stop()
	nc, cl, err := opts.connect(env, "agent", cuecast.ConfigPath(opts.Configs[0]).Namespace(), client.WithHealth(a.health), client.WithApplyError(a.applyError))
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := serveAgentMetrics(ctx, env, opts.Metrics, opts.MetricsHosts, cl); err != nil {
		return err
	}
	var wg sync.WaitGroup
	// On an early return too, the watchers started stop before agent does.
	defer func() { cancel(); wg.Wait() }()
	errs := make(chan error, len(opts.Configs))
	for _, c := range opts.Configs {
		cfg := cuecast.ConfigPath(c)
		if err := a.startDirs(cfg); err != nil {
			return err
		}
		lkg := a.out.abs(path.Join(".cuecast", c) + ".lkg")
		w, err := cl.Watch(ctx, cfg, a.watchOptions(lkg)...)
		if err != nil {
			return opts.watchError(cfg, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.keep(ctx, cl, cfg, lkg, w, rewatch.of(cfg)); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); a.retryLoop(ctx) }()
	notifyDone := make(chan struct{})
	go func() { defer close(notifyDone); a.notifyLoop(ctx) }()
	<-ctx.Done()
	wg.Wait()
	<-notifyDone
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// keep writes each version w applies until ctx ends, and watches cfg
// anew when its variants change (docs/VARIANTS.md): a variant index
// arrived where a plain config was, or the variant kept was removed.
func (a *agent) keep(ctx context.Context, cl *client.Client, cfg cuecast.ConfigPath, lkg string, w *client.Watcher, rewatch <-chan struct{}) error {
	pace := &rewatchBackoff{pause: a.env.rewatchPause}
	for {
		again, err := untilRewatch(ctx, w, rewatch, func(s client.Snapshot) error {
			pace.applied(s)
			return a.write(s)
		})
		if err != nil || !again {
			w.Stop()
			return err
		}
		fmt.Fprintf(a.env.IO.ErrOut, "agent %s: %s's variants changed; watching it again to pick this instance's variant\n", a.opts.Instance, cfg.Base())
		// The watcher keeps what it holds, and reports, until the re-watch.
		err = pace.wait(ctx)
		w.Stop()
		if err != nil {
			return nil
		}
		if w, err = cl.Watch(ctx, cfg, a.watchOptions(lkg)...); err != nil {
			return a.opts.watchError(cfg, err)
		}
	}
}

// watchOptions are a config's watch options: its last-known-good copy at
// lkg and, with --ofrep, the refusal of a flag set this build cannot
// evaluate. Taken, such a version left OFREP on the version before while
// the instance reported the new one applied and healthy, so a rollout
// went on to every host; refused, the instance keeps the version it has
// (file and OFREP alike) and reports the version failed, as a service's
// evaluator does (docs/FLAGS.md, "In a service").
func (a *agent) watchOptions(lkg string) []client.WatchOption {
	opts := []client.WatchOption{client.LastKnownGood(lkg)}
	if a.ofrep != nil {
		opts = append(opts, client.Validate(ofrep.Evaluable))
	}
	return opts
}

// write puts one snapshot on disk and asks for a notification. A write
// that fails (a full or read-only disk, a directory not the agent's) is
// the instance's health, not the agent's end: it keeps serving what it
// has and retryLoop tries again.
func (a *agent) write(s client.Snapshot) error {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.ofrep.apply(a, s)
	return a.put(s)
}

// put writes s (under writeMu), recording the outcome for health and
// retryLoop; only a failure to print is returned.
func (a *agent) put(s client.Snapshot) error {
	cfg := s.Config.Base()
	rel := string(cfg) + ".json"
	line := writtenLine{Config: s.Config, Version: s.Version, File: a.file(s.Config), Deleted: s.Deleted}
	// The client writes the last-known-good copy there by path: it is
	// checked here, as each directory written in is, for it to be reported.
	_, err := a.out.dir(path.Join(".cuecast", cfg.Namespace()), true)
	switch {
	case err != nil:
	case s.Deleted:
		err = a.out.remove(rel)
	default:
		err = a.out.write(rel, s.Content)
	}
	if err != nil {
		a.failedWrite(cfg, &s, err)
		return nil
	}
	a.wrote(cfg)
	if err := jsonLine(a.env.IO.Out).Encode(line); err != nil {
		return err
	}
	a.mu.Lock()
	a.last = s
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
	return nil
}

// notifyLoop runs the command or sends the signal once per burst of changes.
func (a *agent) notifyLoop(ctx context.Context) {
	if a.opts.Exec == "" && a.opts.Signal == "" {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		}
		quiet := time.NewTimer(a.opts.Quiet)
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				quiet.Stop()
				return
			case <-a.kick:
				quiet.Reset(a.opts.Quiet)
			case <-quiet.C:
				waiting = false
			}
		}
		err := a.notify(ctx)
		a.mu.Lock()
		a.healthy, a.lastErr = err == nil, ""
		if ne := (*notifyError)(nil); errors.As(err, &ne) {
			a.lastErr = ne.why
		}
		a.mu.Unlock()
		if err != nil {
			fmt.Fprintf(a.env.IO.ErrOut, "agent %s: %v\n", a.opts.Instance, err)
		}
	}
}

// notifyError is a failed --exec or --signal. Its Error, said on stderr,
// names the command; why, which the reports carry to every reader, does
// not: a reload command may hold a secret (a token in a curl).
type notifyError struct {
	err error
	why string
}

func (e *notifyError) Error() string { return e.err.Error() }
func (e *notifyError) Unwrap() error { return e.err }

func (a *agent) notify(ctx context.Context) error {
	if a.opts.Signal != "" {
		pid, sig, _ := parseSignal(a.opts.Signal)
		if err := syscall.Kill(pid, sig); err != nil {
			return &notifyError{fmt.Errorf("signal %s: %w", a.opts.Signal, err), fmt.Sprintf("--signal %s failed: %v", a.opts.Signal, err)}
		}
		return nil
	}
	a.mu.Lock()
	last := a.last
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, a.opts.ExecTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", a.opts.Exec)
	// The command and whatever it starts are one process group, ended
	// together at the timeout: killing the shell alone left its children
	// running, and one holding the output kept Run, and every later
	// reload, waiting until it exited.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	cmd.Env = append(execEnviron(os.Environ()),
		"CUECAST_CONFIG="+string(last.Config),
		"CUECAST_VERSION="+strconv.FormatUint(last.Version, 10),
		"CUECAST_FILE="+a.file(last.Config),
	)
	cmd.Stdout, cmd.Stderr = a.env.IO.ErrOut, a.env.IO.ErrOut
	if err := cmd.Run(); err != nil {
		why := "--exec failed: " + err.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("--exec timed out after %s", a.opts.ExecTimeout)
		}
		return &notifyError{fmt.Errorf("--exec %q: %w", a.opts.Exec, err), why}
	}
	return nil
}

// file is where the agent keeps cfg for the service: a variant is
// written at its config's file (OUT/payments/checkout.json whichever
// variant it runs), and --exec's $CUECAST_FILE names the same.
func (a *agent) file(cfg cuecast.ConfigPath) string {
	return a.out.abs(string(cfg.Base()) + ".json")
}

// execEnviron is environ without the variables any cuecast command reads
// secrets from, and without $NATS_URL when it holds a password or a token:
// the service's reload command has no need of them.
func execEnviron(environ []string) []string {
	secretEnv := []string{"CUECAST_NATS_PASSWORD", "CUECAST_NATS_CREDS", "CUECAST_OPERATOR_TOKEN", "CUECAST_WEBHOOK_SECRET",
		"CUECAST_PROMETHEUS_URL", "CUECAST_GIT_TOKEN", "CUECAST_GIT_SSH_PASSPHRASE", "GITHUB_TOKEN"}
	out := environ[:0:0]
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !slices.Contains(secretEnv, name) && (name != "NATS_URL" || redact.URLs(value) == value) {
			out = append(out, kv)
		}
	}
	return out
}

// health is what the agent reports: unhealthy while the service's reload
// command fails, or a file could not be written, so a rollout halts rather
// than spreading a config the service cannot take or does not have.
func (a *agent) health() cuecast.Health {
	a.mu.Lock()
	defer a.mu.Unlock()
	details := make([]string, 0, 1+len(a.writeErr))
	if a.lastErr != "" {
		details = append(details, a.lastErr)
	}
	for _, cfg := range slices.Sorted(maps.Keys(a.writeErr)) {
		details = append(details, a.writeErr[cfg])
	}
	return cuecast.Health{Healthy: a.healthy && len(a.writeErr) == 0, Detail: strings.Join(details, "; ")}
}

// applyError is why the service does not have cfg as the instance applied
// it, for cfg's reports (client.WithApplyError): its file could not be
// written, or the last --exec or --signal failed.
func (a *agent) applyError(cfg cuecast.ConfigPath) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	why := make([]string, 0, 2)
	if e := a.writeErr[cfg.Base()]; e != "" {
		why = append(why, e)
	}
	if a.lastErr != "" {
		why = append(why, a.lastErr)
	}
	return strings.Join(why, "; ")
}
