package distributor

import (
	"sync"
	"time"
)

// intake is a summarizer's queue of the report messages it has heard and
// not yet taken in, each stamped with the time it arrived.
//
// The subscription's callback only stamps and queues; one taker decodes
// and counts, in order. When taking in was the callback's own work, a
// report stamped when its turn came and the taker's clock ran on while it
// decoded: a report of nearly a megabyte, the most an instance's
// credential may send, took 3 s to decode under the race detector on a
// loaded box, and the summarizer's tick, which expires what is older than
// the loss rule's heartbeats, found every other instance of the region
// expired though their next reports were queued behind it
// (TestOneInstanceCannotSilenceItsRegion). Now a report's age is judged
// against heard: an instance expires only when no report of it arrived
// for the loss rule's time up to the oldest report not yet taken in.
type intake struct {
	mu   sync.Mutex
	room sync.Cond // a put waits on it while the queue is full
	more sync.Cond // the taker waits on it while the queue is empty
	// q[head:] is the queue. The taken ones stay in front until the
	// queue empties or they are half of it, so that its array is used
	// again: re-slicing past each taken one left capacity behind, and
	// appends copied the queue into a new array again and again (~210 B
	// allocated a report; BenchmarkIntake).
	q    []arrival
	head int
	// size is the bytes queued; a put waits while it is over maxQueued,
	// so that a taker that falls behind holds back the subscription,
	// whose own limits then apply (nats.go drops past them, as a slow
	// consumer), rather than growing without bound.
	size int
	// taking is the arrival of the message being taken in, zero when none.
	taking time.Time
	closed bool
}

// arrival is a report message as it arrived.
type arrival struct {
	subject string
	data    []byte
	at      time.Time
}

// maxQueued bounds the bytes an intake queues: thousands of reports, and
// more than one message of the largest a server takes.
const maxQueued = 16 << 20

func newIntake() *intake {
	in := &intake{}
	in.room.L = &in.mu
	in.more.L = &in.mu
	return in
}

// put queues a message that arrived at at; it waits while the queue is
// full, and drops the message once the intake is closed.
func (in *intake) put(subject string, data []byte, at time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for in.size > maxQueued && !in.closed {
		in.room.Wait()
	}
	if in.closed {
		return
	}
	in.q = append(in.q, arrival{subject: subject, data: data, at: at})
	in.size += len(data)
	in.more.Signal()
}

// next returns the oldest message queued, waiting for one, and marks it
// being taken in until the next call; false once the intake is closed.
func (in *intake) next() (arrival, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.taking = time.Time{}
	for in.head == len(in.q) && !in.closed {
		in.more.Wait()
	}
	if in.closed {
		return arrival{}, false
	}
	a := in.q[in.head]
	in.q[in.head] = arrival{}
	in.head++
	switch {
	case in.head == len(in.q):
		in.q, in.head = in.q[:0], 0
	case in.head >= len(in.q)/2 && in.head >= 64:
		n := copy(in.q, in.q[in.head:])
		clear(in.q[n:])
		in.q, in.head = in.q[:n], 0
	}
	in.size -= len(a.data)
	in.taking = a.at
	in.room.Broadcast()
	return a, true
}

// heard is the time up to which every message that arrived has been taken
// in: the arrival of the one being taken in, or of the oldest queued, or
// now when there is none.
func (in *intake) heard(now time.Time) time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	oldest := now
	switch {
	case !in.taking.IsZero():
		oldest = in.taking
	case in.head < len(in.q):
		oldest = in.q[in.head].at
	}
	if oldest.After(now) {
		return now
	}
	return oldest
}

// close drops what is queued and wakes every put and the taker.
func (in *intake) close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	in.q, in.head, in.size = nil, 0, 0
	in.room.Broadcast()
	in.more.Broadcast()
}
