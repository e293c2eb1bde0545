package scalesim

import (
	"context"
	"fmt"
	"os"
	"strconv"
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
)

// floorKind is the kind of simfleet round the floor's message reaches.
const floorKind = "floor"

// fleetMain runs a child's instances, each as the namespace's service user
// with its own connection to the child's node, reading the node's mirror,
// with a core subscription on the floor's subject beside its watcher.
func fleetMain() int {
	key := os.Getenv(keyEnv)
	var trust client.Option
	switch mode := os.Getenv(modeEnv); mode {
	case "unsigned":
		trust = client.WithInsecureSkipVerify()
	case "signed":
		trust = client.WithTrustedKeys(key)
	case "signed-shared":
		k, err := client.NewKeyring(key)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scalesim fleet:", err)
			return 1
		}
		trust = client.WithKeyring(k)
	default:
		fmt.Fprintf(os.Stderr, "scalesim fleet: %s=%q: want unsigned, signed or signed-shared\n", modeEnv, mode)
		return 1
	}
	err := simfleet.Run(context.Background(), simfleet.Options{
		Config: Config,
		Client: []client.Option{trust, client.WithStream("", natsconf.MirrorStream(Namespace))},
		Dial:   []nats.Option{nats.CustomInboxPrefix(natsconf.InboxPrefix(Namespace))},
		Conn: func(i int, nc *nats.Conn, armed func() *simfleet.Round) error {
			_, err := nc.Subscribe(floorSubject, func(m *nats.Msg) {
				at := time.Now()
				if r := armed(); r != nil && r.Kind == floorKind && m.Header.Get("Round") == strconv.FormatUint(r.Want, 10) {
					r.Hit(i, at)
				}
			})
			return err
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalesim fleet:", err)
		return 1
	}
	return 0
}
