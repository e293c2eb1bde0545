package natsconf_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestServiceBatchedDirectGet: a service's batched direct get of its own
// mirror returns every message of the batch, not only the first. The
// namespaces' direct-get exports answer with several messages to one
// request, which an export lets through only with response_type stream.
func TestServiceBatchedDirectGet(t *testing.T) {
	forEachSuiteMode(t, func(t *testing.T, st *suiteTree) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, err := distributor.New(ctx, st.dist, distributor.Options{Heartbeat: time.Hour})
		if err != nil {
			t.Fatalf("distributor: %v", err)
		}
		publish(t, d, checkout, 2, `{"v":2}`)
		publish(t, d, checkout, 3, `{"v":3}`)
		for i, srv := range st.servers {
			if i == 0 && len(st.servers) > 1 {
				continue // the hub holds no namespace mirrors
			}
			t.Run(srv.Spec.Name, func(t *testing.T) {
				total := streamState(t, st.dist, st.domains[i], natsconf.MirrorStream("payments"))
				poll.Until(t, "the mirror holds the three versions and the pointer", 20*time.Second, func() (bool, string) {
					total = streamState(t, st.dist, st.domains[i], natsconf.MirrorStream("payments"))
					return total.Msgs >= 4, fmt.Sprintf("%d messages", total.Msgs)
				})
				nc := srv.Connect(t, natsconf.ServiceUser("payments"))
				sub, err := nc.SubscribeSync(nc.NewRespInbox())
				if err != nil {
					t.Fatal(err)
				}
				if err := nc.PublishRequest("$JS.API.DIRECT.GET."+natsconf.MirrorStream("payments"), sub.Subject, []byte(`{"seq":1,"batch":100}`)); err != nil {
					t.Fatal(err)
				}
				got := 0
				for {
					m, err := sub.NextMsg(5 * time.Second)
					if err != nil {
						t.Fatalf("batched direct get: %d messages, then %v; want %d and the end of batch", got, err, total.Msgs)
					}
					if m.Header.Get("Status") == "204" {
						break
					}
					if s := m.Header.Get("Status"); s != "" {
						t.Fatalf("batched direct get: status %s %s after %d messages", s, m.Header.Get("Description"), got)
					}
					got++
				}
				if uint64(got) != total.Msgs || got < 3 {
					t.Errorf("batched direct get through %s: %d messages, want %d", natsconf.ServiceUser("payments"), got, total.Msgs)
				}
			})
		}
	})
}
