package client

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// TestUpdatesOffersTheNewestOnce: a watcher offers nothing on Updates
// until it is called (most services read Current), and then behaves as if
// it had offered every snapshot all along: the first call has the newest
// waiting, never one twice, never an older one after a newer, whenever the
// call comes relative to the applies (run with -race).
func TestUpdatesOffersTheNewestOnce(t *testing.T) {
	const versions = 40
	for _, callAt := range []int{0, 1, 7, 20, versions} {
		t.Run("first call after "+strconv.Itoa(callAt)+" applies", func(t *testing.T) {
			cfg := cuecast.ConfigPath("payments/checkout")
			c, err := New(new(nats.Conn), WithInstance("updates-1"), WithInsecureSkipVerify())
			if err != nil {
				t.Fatal(err)
			}
			w := newWatcher(c, cfg, watchOptions{})
			defer w.timer.Stop()
			msgs := make([]*nats.Msg, versions+1)
			for v := 1; v <= versions; v++ {
				m := benchPointerMsg(t, w, cuecast.Pointer{Config: cfg, Version: uint64(v), Seq: uint64(v)}, v)
				m.Header.Set(headerSeq, strconv.Itoa(v))
				m.Header.Set(headerLast, strconv.Itoa(v-1))
				msgs[v] = m
			}
			got := make(chan []uint64)
			start := make(chan struct{})
			go func() {
				<-start
				var seen []uint64
				ch := w.Updates()
				for {
					select {
					case s := <-ch:
						seen = append(seen, s.Version)
						if s.Version == versions {
							got <- seen
							return
						}
					case <-time.After(10 * time.Second):
						got <- seen
						return
					}
				}
			}()
			for v := 1; v <= versions; v++ {
				if v == callAt+1 {
					close(start)
				}
				w.handle(msgs[v]) // as the run loop would, while Updates is read
			}
			if callAt == versions {
				close(start)
			}
			seen := <-got
			if len(seen) == 0 || seen[len(seen)-1] != versions {
				t.Fatalf("Updates delivered %v, want it to end at version %d", seen, versions)
			}
			for i := 1; i < len(seen); i++ {
				if seen[i] <= seen[i-1] {
					t.Fatalf("Updates delivered %v: version %d after %d", seen, seen[i], seen[i-1])
				}
			}
			if callAt == versions && len(seen) != 1 {
				t.Errorf("a first call after every apply delivered %v, want only the newest", seen)
			}
			select {
			case s := <-w.updates:
				t.Fatalf("version %d offered again after %v", s.Version, seen)
			default:
			}
		})
	}
}
