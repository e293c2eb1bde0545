package natsconf_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestServiceBatchedDirectGet: a service's batched direct get of its own
// mirror returns every message of the batch, not only the first. The
// namespaces' direct-get exports answer with several messages to one
// request, which an export lets through only with response_type stream.
func TestServiceBatchedDirectGet(t *testing.T) {
	forEachSuiteMode(t, func(t *testing.T, st *suiteTree) {
		d := st.distributor(t)
		publish(t, d, checkout, 2, `{"v":2}`)
		publish(t, d, checkout, 3, `{"v":3}`)
		for i, srv := range st.servers {
			if i == 0 && len(st.servers) > 1 {
				continue // the hub holds no namespace mirrors
			}
			t.Run(srv.Spec.Name, func(t *testing.T) {
				total := streamState(t, st.dist, st.domains[i], natsconf.MirrorStream("payments"))
				poll.Until(t, "the mirror holds the three versions and the pointer", poll.Patience, func() (bool, string) {
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

// TestServiceDirectGetLeavesNoResponse: a service's read of one subject's
// last message (the last-by-subject direct get every watcher makes at
// start, on reconnect and at each reconcile) leaves no response mapping
// behind in the server. Exported with response_type stream, as the batched
// gets must be, each such read kept its mapping for the export's response
// threshold (two minutes): at 5,000 instances per node some 30,000 of
// them, which every closing connection's inbox subscription was matched
// against (BENCHMARKS.md "Scale"). That subject form answers one message
// only (JetStream refuses a batch there), so its export is a singleton.
func TestServiceDirectGetLeavesNoResponse(t *testing.T) {
	forEachSuiteMode(t, func(t *testing.T, st *suiteTree) {
		d := st.distributor(t)
		publish(t, d, checkout, 2, `{"v":2}`)
		const reads = 20
		for i, srv := range st.servers {
			if i == 0 && len(st.servers) > 1 {
				continue // the hub holds no namespace mirrors
			}
			t.Run(srv.Spec.Name, func(t *testing.T) {
				nc := srv.Connect(t, natsconf.ServiceUser("payments"))
				subj := "$JS.API.DIRECT.GET." + natsconf.MirrorStream("payments") + "." + cuecast.VersionSubject(checkout)
				poll.Until(t, "the mirror holds version 2", poll.Patience, func() (bool, string) {
					m, err := nc.Request(subj, nil, 5*time.Second)
					if err != nil {
						return false, err.Error()
					}
					return m.Header.Get("Status") == "", m.Header.Get("Status")
				})
				for range reads {
					request(t, nc, subj, nil)
				}
				// A singleton's mapping goes right after its answer; a
				// streamed one's would stay for two minutes.
				poll.Until(t, "no response mapping pending", poll.Patience, func() (bool, string) {
					got := pendingResponses(t, srv.Server)
					return got == 0, fmt.Sprintf("after %d last-by-subject direct gets: %d response mappings pending, want 0", reads+1, got)
				})
			})
		}
	})
}

// pendingResponses is how many service-import responses s still tracks
// over all its accounts (the exporters' response imports and the
// requesters' reverse entries).
func pendingResponses(t *testing.T, s *server.Server) int {
	t.Helper()
	az, err := s.Accountz(&server.AccountzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range az.Accounts {
		acc, err := s.LookupAccount(name)
		if err != nil {
			t.Fatal(err)
		}
		n += acc.NumPendingAllResponses() + acc.NumPendingReverseResponses()
	}
	return n
}
