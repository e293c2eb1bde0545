package distributor

import (
	"fmt"
	"testing"
	"time"
)

// TestIntakeHeard: heard is the arrival of the report being taken in, else
// of the oldest queued, else now; never later than now.
func TestIntakeHeard(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	in := newIntake()
	if got := in.heard(now); !got.Equal(now) {
		t.Fatalf("empty: heard %v, want now %v", got, now)
	}
	in.put("a", []byte("1"), t0)
	in.put("b", []byte("2"), t0.Add(time.Second))
	if got := in.heard(now); !got.Equal(t0) {
		t.Errorf("two queued: heard %v, want the oldest's arrival %v", got, t0)
	}
	if got := in.heard(t0.Add(-time.Second)); !got.Equal(t0.Add(-time.Second)) {
		t.Errorf("heard %v, want no later than now", got)
	}
	a, ok := in.next()
	if !ok || a.subject != "a" {
		t.Fatalf("next = %+v, %v; want a", a, ok)
	}
	if got := in.heard(now); !got.Equal(t0) {
		t.Errorf("a being taken in: heard %v, want its arrival %v", got, t0)
	}
	if b, ok := in.next(); !ok || b.subject != "b" {
		t.Fatalf("next = %+v, %v; want b", b, ok)
	}
	if got := in.heard(now); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("b being taken in: heard %v, want its arrival", got)
	}
	in.close()
	if _, ok := in.next(); ok {
		t.Error("next after close: got a report")
	}
}

// TestIntakeKeepsOrder: however puts and takes interleave, as the queue
// empties, refills and moves its taken ones out of the way, the taker gets
// the reports in the order they came, and heard is the oldest queued's.
func TestIntakeKeepsOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	in := newIntake()
	put, took := 0, 0
	take := func() {
		t.Helper()
		a, ok := in.next()
		if want := fmt.Sprint(took); !ok || a.subject != want {
			t.Fatalf("next = %q, %v; want %s", a.subject, ok, want)
		}
		took++
		in.taking = time.Time{} // taken in: heard is the oldest queued's again
		if took < put {
			if got, want := in.heard(now), t0.Add(time.Duration(took)*time.Millisecond); !got.Equal(want) {
				t.Fatalf("after %d taken of %d: heard %v, want %v", took, put, got, want)
			}
		}
	}
	for _, step := range []struct{ puts, takes int }{{1, 1}, {3, 2}, {200, 150}, {10, 60}, {500, 499}, {1, 2}, {300, 0}, {0, 301}} {
		for range step.puts {
			in.put(fmt.Sprint(put), []byte("x"), t0.Add(time.Duration(put)*time.Millisecond))
			put++
		}
		for range step.takes {
			take()
		}
	}
	if took != put || in.size != 0 {
		t.Errorf("took %d of %d, %d bytes left queued", took, put, in.size)
	}
}

// TestIntakeHoldsBackWhenFull: a put over maxQueued waits until the taker
// frees room, so a taker that falls behind holds back the subscription
// rather than the queue growing without bound; close frees it.
func TestIntakeHoldsBackWhenFull(t *testing.T) {
	in := newIntake()
	now := time.Now()
	in.put("big", make([]byte, maxQueued+1), now) // one message always fits
	put := make(chan struct{})
	go func() {
		in.put("small", []byte("x"), now)
		close(put)
	}()
	select {
	case <-put:
		t.Fatal("a put over a full queue did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	if a, ok := in.next(); !ok || a.subject != "big" {
		t.Fatalf("next = %q, %v; want big", a.subject, ok)
	}
	<-put // freed by next
	if a, ok := in.next(); !ok || a.subject != "small" {
		t.Fatalf("next = %q, %v; want small", a.subject, ok)
	}

	in.put("big", make([]byte, maxQueued+1), now)
	put = make(chan struct{})
	go func() {
		in.put("dropped", []byte("x"), now)
		close(put)
	}()
	in.close()
	<-put // freed by close, and dropped
	if _, ok := in.next(); ok {
		t.Error("next after close: got a report")
	}
}

// BenchmarkIntake is what the intake adds to each report a summarizer
// takes in (BenchmarkSummarizerIngest is the taking in): the
// subscription's callback queues it, stamped, and the taker, a goroutine
// of its own as in Run, takes it out, one report of ~300 bytes at a time.
func BenchmarkIntake(b *testing.B) {
	in := newIntake()
	data := make([]byte, 300)
	done := make(chan int)
	go func() {
		n := 0
		for {
			if _, ok := in.next(); !ok {
				done <- n
				return
			}
			n++
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		in.put("ccs.payments.web-1.checkout", data, time.Now())
	}
	// The taker drains what is queued: heard is now only when nothing is
	// queued or being taken in.
	for now := time.Now(); in.heard(now).Before(now); now = time.Now() {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	in.close()
	<-done
}
