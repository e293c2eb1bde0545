package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/spf13/pflag"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/redact"
)

// serviceFlags are what watch and agent share: they both run the client
// library as one service instance.
type serviceFlags struct {
	Instance string
	NATS     string
	Labels   map[string]string
	// Dims and Variant are the instance's dimension values (--dim
	// env=prod, repeatable, and --variant env=prod,region=eu), merged by
	// validate into dims.
	Dims    map[string]string
	Variant string
	dims    map[string]string
	// rewatch, when set, is told (it must not block) the base path of a
	// config whose watcher must start again to pick its variant: a
	// variant index arrived at a plain config's watcher, or the variant
	// watched was removed (client.ErrVariant events).
	rewatch     func(cuecast.ConfigPath)
	TrustedKeys []string
	// TrustedKeysFile is serve's <data>/trusted-keys (or a copy of it).
	TrustedKeysFile string
	// InsecureSkipVerify accepts unsigned content: the only way to run
	// without trusted keys.
	InsecureSkipVerify bool
	// Conn and NamespaceMirror: credentials, TLS, and reading from the
	// namespace's mirror (connflags.go, docs/SCALING.md).
	Conn            ConnFlags
	NamespaceMirror bool
	// Heartbeat and Reconcile: client.WithHeartbeat (serve's --heartbeat)
	// and client.WithReconcile.
	Heartbeat time.Duration
	Reconcile time.Duration
}

func (f *serviceFlags) register(fs *pflag.FlagSet, env *Env) {
	fs.StringVar(&f.Instance, "instance", "", "this instance's ID (its cohort is derived from it)")
	fs.StringVar(&f.NATS, "nats", defaultNATSURL(env), "NATS server URL")
	fs.StringToStringVar(&f.Labels, "label", nil, "labels reported with this instance, like --label canary=true")
	fs.StringToStringVar(&f.Dims, "dim", nil, "this instance's value of a dimension, like --dim env=prod (repeatable): a config with variants is watched in the variant of these values")
	fs.StringVar(&f.Variant, "variant", "", "this instance's dimension values at once, like --variant env=prod,region=eu (with --dim: the same dimension may not differ)")
	fs.StringSliceVar(&f.TrustedKeys, "trusted-key", nil, "public key that signs what to accept, as 'cuecast keys' prints it (repeatable)")
	fs.StringVar(&f.TrustedKeysFile, "trusted-keys-file", "", "file of trusted public keys: serve's <data>/trusted-keys, or 'cuecast keys' output")
	fs.BoolVar(&f.InsecureSkipVerify, "insecure-skip-verify", false, "accept unsigned content: anyone who can publish on NATS decides what runs (tests and demos only)")
	f.Conn.Register(fs)
	fs.DurationVar(&f.Heartbeat, "heartbeat", 15*time.Second, "how often to report when nothing changes: serve's --heartbeat, the same for every instance (a report is live for four)")
	fs.DurationVar(&f.Reconcile, "reconcile", 60*time.Second, "how often to re-read the pointers even when no change was missed (jittered ±10%)")
	fs.BoolVar(&f.NamespaceMirror, "namespace-mirror", false, "read from the namespace's mirror CUECAST_<ns> with the namespace's inbox prefix, as service credentials from 'cuecast nats-config' require")
}

func (f *serviceFlags) validate() error {
	if err := cuecast.ValidateInstance(f.Instance); err != nil {
		return &UsageError{Err: err, Hint: "pass --instance with a stable ID for this service instance"}
	}
	if f.Heartbeat <= 0 || f.Reconcile <= 0 {
		return usageErrorf("use positive durations, like --heartbeat 60s --reconcile 5m", "--heartbeat %s, --reconcile %s: want positive durations", f.Heartbeat, f.Reconcile)
	}
	dims, err := cuecast.ParseVariant(f.Variant)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("--variant: %w", err), Hint: "write --variant env=prod,region=eu"}
	}
	for _, d := range slices.Sorted(maps.Keys(f.Dims)) {
		v := f.Dims[d]
		if !cuecast.ValidSegment(d) || !cuecast.ValidSegment(v) {
			return usageErrorf("write --dim env=prod: dimension and value each [a-z0-9][a-z0-9_-]*", "--dim %s=%s: not <dimension>=<value>", d, v)
		}
		if w, ok := dims[d]; ok && w != v {
			return usageErrorf("give each dimension one value", "dimension %s is %s by --variant and %s by --dim", d, w, v)
		}
		dims[d] = v
	}
	f.dims = dims
	return nil
}

// watchError is a Watch error for the command line: a config with
// variants that has none for the declared dimensions is a usage error
// (exit 2) saying which flag to pass.
func (f *serviceFlags) watchError(cfg cuecast.ConfigPath, err error) error {
	if errors.Is(err, client.ErrVariant) {
		return &UsageError{Err: fmt.Errorf("watch %s: %w", cfg, err), Hint: "declare this instance's values with --dim <dimension>=<value> (repeatable) or --variant env=prod,region=eu; `cuecast status " + string(cfg.Base()) + "` lists the variants"}
	}
	return fmt.Errorf("watch %s: %w", cfg, err)
}

// validateTrust refuses to run without trusted keys unless told
// --insecure-skip-verify: a service that accepts unsigned content runs
// whatever anyone who can publish on NATS sends it.
func (f *serviceFlags) validateTrust() error {
	trusted := len(f.TrustedKeys) > 0 || f.TrustedKeysFile != ""
	switch {
	case !trusted && !f.InsecureSkipVerify:
		return usageErrorf("pass --trusted-keys-file with serve's <data>/trusted-keys (or what `cuecast keys --data DIR` prints on the serve host), or --trusted-key KEY",
			"no trusted keys: refusing to accept content nobody is known to have signed")
	case trusted && f.InsecureSkipVerify:
		return usageErrorf("drop --insecure-skip-verify", "--insecure-skip-verify and trusted keys both given")
	}
	for _, k := range f.TrustedKeys {
		if _, err := nkeys.FromPublicKey(k); err != nil {
			return usageErrorf("pass a key as `cuecast keys --data DIR` prints it on the serve host", "--trusted-key %q is not a public key: %v", k, err)
		}
	}
	return nil
}

// connect dials NATS the way a service should (reconnect forever, start
// while the server is down) and builds the client. namespace is the one
// namespace read through its mirror under --namespace-mirror.
func (f *serviceFlags) connect(env *Env, name, namespace string, extra ...client.Option) (*nats.Conn, *client.Client, error) {
	connOpts, err := f.Conn.Options(env)
	if err != nil {
		return nil, nil, err
	}
	clientOpts := []client.Option{
		client.WithInstance(f.Instance),
		client.WithLabels(f.Labels),
		client.WithDimensions(f.dims),
		client.WithHeartbeat(f.Heartbeat),
		client.WithReconcile(f.Reconcile),
		client.WithEvents(func(ev client.Event) {
			fmt.Fprintf(env.IO.ErrOut, "%s %s: %s\n", name, f.Instance, ev)
			if f.rewatch != nil && errors.Is(ev.Err, client.ErrVariant) && (ev.Kind == client.EventRejected || ev.Kind == client.EventError) {
				f.rewatch(ev.Config.Base())
			}
		}),
	}
	switch {
	case f.InsecureSkipVerify:
		fmt.Fprintf(env.IO.ErrOut, "%s %s: WARNING: --insecure-skip-verify: signatures are NOT checked; anyone who can publish on NATS decides what this instance runs\n", name, f.Instance)
		clientOpts = append(clientOpts, client.WithInsecureSkipVerify())
	default:
		keys := slices.Clone(f.TrustedKeys)
		if f.TrustedKeysFile != "" {
			fromFile, err := client.ReadTrustedKeys(f.TrustedKeysFile)
			if err != nil {
				return nil, nil, &UsageError{Err: err, Hint: "copy serve's <data>/trusted-keys, or save what `cuecast keys --data DIR` prints"}
			}
			keys = append(keys, fromFile...)
		}
		clientOpts = append(clientOpts, client.WithTrustedKeys(keys...))
	}
	if f.NamespaceMirror {
		// The instance's own prefix: the only one its own credential
		// (nats-config user --instance) may receive replies on, and within
		// the namespace's, which its password allows.
		connOpts = append(connOpts, nats.CustomInboxPrefix(natsconf.InstanceInboxPrefix(namespace, f.Instance)))
		clientOpts = append(clientOpts, client.WithStream("", natsconf.MirrorStream(namespace)))
	}
	nc, err := nats.Connect(f.NATS, append(append(client.ConnectOptions(),
		nats.Name("cuecast "+name+" "+f.Instance), nats.ErrorHandler(f.asyncError(env, name)),
	), connOpts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", redact.URLs(f.NATS), err)
	}
	cl, err := client.New(nc, append(clientOpts, extra...)...)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("start client: %w", err)
	}
	return nc, cl, nil
}

// rewatchSignal is a rewatch hook that never blocks: each base path has
// a channel of one, and a signal while one is pending is the same signal.
type rewatchSignal map[cuecast.ConfigPath]chan struct{}

// A config named by its variant path is watched as named: its removal is
// reported, not re-resolved, since watching the same path again would
// only find the same tombstone and signal again, for ever.
func newRewatchSignal(cfgs ...cuecast.ConfigPath) rewatchSignal {
	r := make(rewatchSignal, len(cfgs))
	for _, c := range cfgs {
		if !c.IsVariant() && r[c] == nil {
			r[c] = make(chan struct{}, 1)
		}
	}
	return r
}

// of is the signal that cfg's variants changed: nil (never) for a config
// named by its variant path.
func (r rewatchSignal) of(cfg cuecast.ConfigPath) <-chan struct{} {
	if cfg.IsVariant() {
		return nil
	}
	return r[cfg]
}

func (r rewatchSignal) notify(base cuecast.ConfigPath) {
	if ch := r[base]; ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// rewatchBackoff paces the re-watches of one config. A change of variants
// needs one re-watch, so the first after an apply from the server is
// immediate; each further one with nothing applied in between waits twice
// as long as the last, from 1 s to a minute: an index the watcher cannot
// verify (a forgery on a server without logins) would otherwise make it
// re-watch thousands of times a second (docs/PROTOCOL.md §10).
type rewatchBackoff struct {
	next  time.Duration
	pause func(ctx context.Context, d time.Duration) error // nil: a timer
}

const (
	rewatchFirstWait = time.Second
	rewatchMaxWait   = time.Minute
)

// applied resets the pace: the watcher applied a version from the server
// (one from its last-known-good file does not count, it comes at every
// start).
func (b *rewatchBackoff) applied(s client.Snapshot) {
	if !s.FromLastKnownGood {
		b.next = 0
	}
}

// wait returns when the next re-watch may start, or ctx's error.
func (b *rewatchBackoff) wait(ctx context.Context) error {
	d := b.next
	b.next = min(max(2*d, rewatchFirstWait), rewatchMaxWait)
	if b.pause != nil {
		return b.pause(ctx, d)
	}
	if d == 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// asyncError says what the server refused, on the service's own stream
// (nats.go's default writes bare lines to the process's stderr), and once
// what to add when a service user reads outside its namespace's mirror.
func (f *serviceFlags) asyncError(env *Env, name string) nats.ErrHandler {
	var once sync.Once
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		on := ""
		if sub != nil {
			on = fmt.Sprintf(" (subscription on %q)", sub.Subject)
		}
		fmt.Fprintf(env.IO.ErrOut, "%s %s: NATS: %v%s\n", name, f.Instance, err, on)
		if errors.Is(err, nats.ErrPermissionViolation) && !f.NamespaceMirror {
			once.Do(func() {
				fmt.Fprintf(env.IO.ErrOut, "%s %s: hint: a service user (svc-<namespace>, from serve --secure or nats-config) reads only its namespace's mirror: add --namespace-mirror\n", name, f.Instance)
			})
		}
	}
}
