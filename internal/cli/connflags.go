package cli

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/redact"
)

// defaultNATSURL is every --nats flag's default: $NATS_URL, else the url of
// the nats CLI's context ($NATS_CONTEXT or the selected one), else the local
// server. A context that cannot be read is reported by ConnFlags.Options.
func defaultNATSURL(env *Env) string {
	if env != nil && env.Getenv != nil {
		if u := env.Getenv("NATS_URL"); u != "" {
			return u
		}
		if c, err := selectedContext(env); err == nil && c != nil && c.URL != "" {
			return c.URL
		}
	}
	return nats.DefaultURL
}

// ConnFlags are the credentials and TLS flags of every command that
// connects to NATS (docs/SCALING.md, docs/SECURITY.md). The password may
// come from a file (--password-file, e.g. one `serve --secure` wrote) or
// $CUECAST_NATS_PASSWORD instead of the command line, the .creds file from
// $CUECAST_NATS_CREDS.
type ConnFlags struct {
	Creds        string
	User         string
	Password     string
	PasswordFile string
	TLSCert      string
	TLSKey       string
	TLSCA        string
}

// Register adds the flags to fs. Flags and $CUECAST_NATS_* variables win over
// the nats CLI's context ($NATS_CONTEXT, or the one `nats context select`
// chose), which fills the rest.
func (f *ConnFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Creds, "creds", "", "NATS credentials file (.creds: user JWT and seed; default $CUECAST_NATS_CREDS)")
	fs.StringVar(&f.User, "user", "", "NATS user (with --password-file, --password or $CUECAST_NATS_PASSWORD)")
	fs.StringVar(&f.Password, "password", "", "NATS password (default $CUECAST_NATS_PASSWORD)")
	fs.StringVar(&f.PasswordFile, "password-file", "", "file holding the NATS password (e.g. DATA/nats/operator.password from serve --secure)")
	fs.StringVar(&f.TLSCert, "tls-cert", "", "client certificate (PEM) for TLS to NATS")
	fs.StringVar(&f.TLSKey, "tls-key", "", "client certificate's key (PEM)")
	fs.StringVar(&f.TLSCA, "tls-ca", "", "CA (PEM) that signed the NATS server's certificate")
}

// Options turns the flags into nats.Options. Conflicting or incomplete
// flags are usage errors.
func (f *ConnFlags) Options(env *Env) ([]nats.Option, error) {
	if (f.Password != "" || f.PasswordFile != "") && f.User == "" {
		return nil, usageErrorf("pass --user with --password or --password-file", "a password without --user")
	}
	if f.Password != "" && f.PasswordFile != "" {
		return nil, usageErrorf("pass either --password or --password-file", "--password and --password-file both given")
	}
	if f.PasswordFile != "" {
		b, err := os.ReadFile(f.PasswordFile)
		if err != nil {
			return nil, &UsageError{Err: fmt.Errorf("read --password-file: %w", err)}
		}
		f.Password = strings.TrimSpace(string(b))
	}
	if f.Password == "" && env.Getenv != nil {
		f.Password = env.Getenv("CUECAST_NATS_PASSWORD")
	}
	if f.Creds == "" && f.User == "" && env.Getenv != nil {
		f.Creds = env.Getenv("CUECAST_NATS_CREDS")
	}
	// The nats CLI's context fills what no flag or variable set.
	ctx, err := selectedContext(env)
	if err != nil {
		return nil, err
	}
	var opts []nats.Option
	if ctx != nil {
		if opts, err = ctx.options(f); err != nil {
			return nil, err
		}
	}
	switch {
	case f.Creds != "" && f.User != "":
		return nil, usageErrorf("pass either --creds or --user", "--creds and --user both given")
	case f.Creds != "":
		opts = append(opts, nats.UserCredentials(f.Creds))
	case f.User != "":
		if f.Password == "" {
			return nil, usageErrorf("pass --password-file (or set $CUECAST_NATS_PASSWORD; --password shows in ps)", "--user %s without a password", f.User)
		}
		opts = append(opts, nats.UserInfo(f.User, f.Password))
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		return nil, usageErrorf("pass both --tls-cert and --tls-key", "a client certificate needs its key")
	}
	if f.TLSCert != "" {
		opts = append(opts, nats.ClientCert(f.TLSCert, f.TLSKey))
	}
	if f.TLSCA != "" {
		opts = append(opts, nats.RootCAs(f.TLSCA))
	}
	return opts, nil
}

// openStreams opens serve's streams and never creates one: a command that
// reads or steers (status, log, flags eval, check --fleet, rollout)
// pointed at a server serve has not set up says so, instead of creating
// streams with default settings on whatever server --nats named.
func openStreams(ctx context.Context, nc *nats.Conn, env *Env, url string) (*distributor.Distributor, error) {
	d, err := distributor.Open(ctx, nc, distributor.Options{Logger: env.Logger()})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%s has no cuecast streams (is it serve's NATS, and has serve started?): %w", redact.URLs(url), err)
	}
	if err != nil {
		return nil, fmt.Errorf("open streams at %s: %w", redact.URLs(url), err)
	}
	return d, nil
}

// openRollout opens the rollout state to steer it (rollout, rollback),
// read-only as to its configuration (the operator's credentials may write
// a record and an audit entry, never a stream's configuration). Like the
// streams, it is serve's to create: where serve's streams exist without
// it, nothing was ever recorded, and the error says so (wrapping
// jetstream.ErrBucketNotFound or ErrStreamNotFound).
func openRollout(ctx context.Context, nc *nats.Conn, d *distributor.Distributor, env *Env) (*rollout.Controller, error) {
	c, err := rollout.Open(ctx, nc, d, nil, rollout.Options{Logger: env.Logger()})
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("open rollout state: the server has cuecast streams but no rollout state (%s); start serve once to create it: %w", rollout.Bucket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open rollout state: %w", err)
	}
	return c, nil
}

// rolloutReader is what status reads of the rollout state.
type rolloutReader interface {
	Records(ctx context.Context) ([]rollout.Record, error)
	Record(ctx context.Context, cfg cuecast.ConfigPath) (rollout.Record, error)
	Progress(ctx context.Context, cfg cuecast.ConfigPath) (rollout.Progress, error)
}

// readRollout opens the rollout state for reading only: where serve's
// streams exist without it, nothing was ever recorded (noRollouts), since
// a command that only reads must not create it.
func readRollout(ctx context.Context, nc *nats.Conn, d *distributor.Distributor, env *Env) (rolloutReader, error) {
	c, err := openRollout(ctx, nc, d, env)
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return noRollouts{}, nil
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// noRollouts is rollout state that was never created: no records.
type noRollouts struct{}

func (noRollouts) Records(context.Context) ([]rollout.Record, error) { return nil, nil }
func (noRollouts) Record(context.Context, cuecast.ConfigPath) (rollout.Record, error) {
	return rollout.Record{}, rollout.ErrNoRollout
}
func (noRollouts) Progress(context.Context, cuecast.ConfigPath) (rollout.Progress, error) {
	return rollout.Progress{}, rollout.ErrNoRollout
}

// ServeScale are the flags that run serve against an external NATS cluster,
// as one of several replicas (docs/SCALING.md).
type ServeScale struct {
	NATS     string
	Replicas int
	LeaseTTL time.Duration
	Conn     ConnFlags
}

func (s *ServeScale) register(fs *pflag.FlagSet) {
	fs.StringVar(&s.NATS, "nats", "", "external NATS server or cluster URL (comma-separated) instead of the embedded server; replicas elect one active serve")
	fs.IntVar(&s.Replicas, "replicas", 0, "replicas of the streams and buckets serve creates on an external cluster (default 1; 3 in production)")
	fs.DurationVar(&s.LeaseTTL, "lease-ttl", 0, "how long the active serve's lease outlives it (default 10s; the same on every serve of one stream)")
	s.Conn.Register(fs)
}

// external validates the flags and turns them into the pipeline's settings.
func (s *ServeScale) external(env *Env) (pipeline.External, error) {
	// The embedded serve holds the lease too: a --nats serve may join it.
	if s.LeaseTTL < 0 || (s.LeaseTTL > 0 && s.LeaseTTL < 100*time.Millisecond) {
		return pipeline.External{}, usageErrorf("a few seconds is typical", "--lease-ttl %s: want at least 100ms", s.LeaseTTL)
	}
	if s.NATS == "" {
		if s.Replicas != 0 || s.Conn != (ConnFlags{}) {
			return pipeline.External{}, usageErrorf("add --nats URL", "--replicas and the credentials and TLS flags need an external NATS (--nats)")
		}
		return pipeline.External{LeaseTTL: s.LeaseTTL}, nil
	}
	if s.Replicas < 0 || s.Replicas > 5 {
		return pipeline.External{}, usageErrorf("use 1 on a single server, 3 on a cluster", "--replicas %d: want 1-5", s.Replicas)
	}
	opts, err := s.Conn.Options(env)
	if err != nil {
		return pipeline.External{}, err
	}
	return pipeline.External{NATS: s.NATS, NATSOptions: opts, Replicas: s.Replicas, LeaseTTL: cmp.Or(s.LeaseTTL, 10*time.Second)}, nil
}

// dial connects an operator command (status, log, tailer) to serve's NATS.
func dial(env *Env, url, name string, conn *ConnFlags) (*nats.Conn, error) {
	connOpts, err := conn.Options(env)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name(name), nats.Timeout(5 * time.Second)}, connOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w (%s)", redact.URLs(url), err, dialHint(err))
	}
	return nc, nil
}

// dialHint says what to look at when a connection fails: a server that
// answered and refused the login or the certificate is running.
func dialHint(err error) string {
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return "the server refused the login: check --user with --password-file (or $CUECAST_NATS_PASSWORD), or --creds"
	case errors.As(err, &uae), errors.As(err, &hne), errors.As(err, &cie), strings.Contains(err.Error(), "tls"):
		return "TLS with the server failed: --tls-ca must name the CA that signed its certificate (serve --secure: <data>/nats/ca.pem), and the URL's host be one the certificate names"
	}
	return "is `cuecast serve` running?"
}

// readStreams is dialStreams for a command that only reads serve's
// streams (check --fleet, flags eval --published): done closes the
// distributor and the connection, so no caller leaves one open.
func readStreams(ctx context.Context, env *Env, url, name string, conn *ConnFlags) (d *distributor.Distributor, done func(), err error) {
	nc, d, err := dialStreams(ctx, env, url, name, conn)
	if err != nil {
		return nil, nil, err
	}
	return d, func() { d.Close(); nc.Close() }, nil
}

// dialStreams connects a command that reads and opens serve's streams
// without creating any (openStreams). The caller closes the connection.
func dialStreams(ctx context.Context, env *Env, url, name string, conn *ConnFlags) (*nats.Conn, *distributor.Distributor, error) {
	nc, err := dial(env, url, name, conn)
	if err != nil {
		return nil, nil, err
	}
	d, err := openStreams(ctx, nc, env, url)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, d, nil
}
