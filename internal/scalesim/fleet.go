package scalesim

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/simfleet"
)

// The instances' children's environment besides simfleet's.
const (
	keyEnv  = "CUECAST_SCALESIM_KEY"
	modeEnv = "CUECAST_SCALESIM_MODE"
	// intervalsEnv is the instances' heartbeat, reconcile and ping
	// intervals as three durations separated by commas, 0 for the
	// client's default (Options.Heartbeat, Reconcile, Ping).
	intervalsEnv = "CUECAST_SCALESIM_INTERVALS"
)

// intervals is intervalsEnv's value for t's instances.
func (t *Tree) intervals() string {
	return strings.Join([]string{t.opts.Heartbeat.String(), t.opts.Reconcile.String(), t.opts.Ping.String()}, ",")
}

// parseIntervals reads intervalsEnv's value into the instances' client
// and connection options; an empty value or a 0 keeps the defaults.
func parseIntervals(s string) ([]client.Option, []nats.Option, error) {
	if s == "" {
		return nil, nil, nil
	}
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return nil, nil, fmt.Errorf("%s=%q: want heartbeat,reconcile,ping", intervalsEnv, s)
	}
	var d [3]time.Duration
	for i := range f {
		var err error
		if d[i], err = time.ParseDuration(f[i]); err != nil || d[i] < 0 {
			return nil, nil, fmt.Errorf("%s=%q: want three durations, 0 for a default", intervalsEnv, s)
		}
	}
	var co []client.Option
	var no []nats.Option
	if d[0] > 0 {
		co = append(co, client.WithHeartbeat(d[0]))
	}
	if d[1] > 0 {
		co = append(co, client.WithReconcile(d[1]))
	}
	if d[2] > 0 {
		no = append(no, nats.PingInterval(d[2]))
	}
	return co, no, nil
}

// fleetMain runs a child's instances, each as the namespace's service user
// with its own connection to the child's node, reading the node's mirror,
// with a core subscription on the floor's subject beside its watcher.
func fleetMain() int {
	trust, err := simfleet.Trust(os.Getenv(modeEnv), os.Getenv(keyEnv))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scalesim fleet: %s: %v\n", modeEnv, err)
		return 1
	}
	co, no, err := parseIntervals(os.Getenv(intervalsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalesim fleet:", err)
		return 1
	}
	return simfleet.RunChild("scalesim fleet:", simfleet.Options{
		Config: Config,
		Client: append([]client.Option{trust, client.WithStream("", natsconf.MirrorStream(Namespace))}, co...),
		Dial:   append([]nats.Option{nats.CustomInboxPrefix(natsconf.InboxPrefix(Namespace))}, no...),
		Conn:   simfleet.FloorConn(floorSubject),
	})
}
