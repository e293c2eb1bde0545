package cli

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natsconf"
)

// serviceFlags are what watch and agent share: they both run the client
// library as one service instance.
type serviceFlags struct {
	Instance    string
	NATS        string
	Labels      map[string]string
	TrustedKeys []string
	// Conn and NamespaceMirror: credentials, TLS, and reading from the
	// namespace's mirror (connflags.go, docs/SCALING.md).
	Conn            ConnFlags
	NamespaceMirror bool
}

func (f *serviceFlags) register(fs *pflag.FlagSet, env *Env) {
	fs.StringVar(&f.Instance, "instance", "", "this instance's ID (its cohort is derived from it)")
	fs.StringVar(&f.NATS, "nats", defaultNATSURL(env), "NATS server URL")
	fs.StringToStringVar(&f.Labels, "label", nil, "labels reported with this instance, like --label canary=true")
	fs.StringSliceVar(&f.TrustedKeys, "trusted-key", nil, "public key printed by `cuecast serve`; anything not signed by it is rejected (repeatable)")
	f.Conn.Register(fs)
	fs.BoolVar(&f.NamespaceMirror, "namespace-mirror", false, "read from the namespace's mirror CUECAST_<ns> with the namespace's inbox prefix, as service credentials from `cuecast nats-config` require")
}

func (f *serviceFlags) validate() error {
	if err := cuecast.ValidateInstance(f.Instance); err != nil {
		return &UsageError{Err: err, Hint: "pass --instance with a stable ID for this service instance"}
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
		client.WithEvents(func(ev client.Event) { fmt.Fprintf(env.IO.ErrOut, "%s %s: %s\n", name, f.Instance, ev) }),
	}
	if len(f.TrustedKeys) > 0 {
		clientOpts = append(clientOpts, client.WithTrustedKeys(f.TrustedKeys...))
	}
	if f.NamespaceMirror {
		connOpts = append(connOpts, nats.CustomInboxPrefix(natsconf.InboxPrefix(namespace)))
		clientOpts = append(clientOpts, client.WithStream("", natsconf.MirrorStream(namespace)))
	}
	nc, err := nats.Connect(f.NATS, append(append(client.ConnectOptions(),
		nats.Name("cuecast "+name+" "+f.Instance),
		nats.ReconnectWait(250*time.Millisecond),
	), connOpts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", f.NATS, err)
	}
	cl, err := client.New(nc, append(clientOpts, extra...)...)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("start client: %w", err)
	}
	return nc, cl, nil
}
