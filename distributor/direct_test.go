package distributor_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestDirectStreamEachContinues: Each returns every message on a wildcard
// subject once, in stream order, when the stream holds more than one
// batch's count (4,097 small messages) and more than one batch's bytes (24
// messages of 900 KB), interleaved with messages on other subjects.
func TestDirectStreamEachContinues(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	nc := s.Connect(t)
	js := natstest.JetStream(t, nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "EACH", Subjects: []string{"each.>"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 900_000)
	var want []string
	// Asynchronously, in order on one connection, waiting for the acks
	// every 500 so that the pending publishes stay far below the
	// client's limit (4,000).
	sent := 0
	settle := func() {
		t.Helper()
		select {
		case <-js.PublishAsyncComplete():
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	publish := func(subj string, data []byte) {
		t.Helper()
		if _, err := js.PublishAsync(subj, data); err != nil {
			t.Fatal(err)
		}
		if sent++; sent%500 == 0 {
			settle()
		}
	}
	for i := range 4097 {
		subj := fmt.Sprintf("each.small.%d", i)
		publish(subj, []byte(subj))
		want = append(want, subj)
		if i%2 == 0 {
			publish("each.other", nil)
		}
	}
	for i := range 24 {
		subj := fmt.Sprintf("each.big.%d", i)
		publish(subj, append([]byte(subj), big...))
		want = append(want, subj)
		publish("each.other", nil)
	}
	settle()
	var got []string
	last := uint64(0)
	err := distributor.NewDirectStream(nc, "EACH").Each(t.Context(), "each.*.*", func(m *jetstream.RawStreamMsg) error {
		if m.Sequence <= last {
			return fmt.Errorf("sequence %d after %d", m.Sequence, last)
		}
		last = m.Sequence
		if !bytes.HasPrefix(m.Data, []byte(m.Subject)) {
			return fmt.Errorf("%s: data %.20q is another message's", m.Subject, m.Data)
		}
		got = append(got, m.Subject)
		return nil
	})
	if err != nil {
		t.Fatalf("Each: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Each returned %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// TestNamespaceReportsRejectsBadNamespace: a namespace that is not one
// path segment (a subject wildcard, a dot) is refused, never read as a
// wider filter.
func TestNamespaceReportsRejectsBadNamespace(t *testing.T) {
	t.Parallel()
	d, _ := newDist(t, distributor.Options{})
	for _, ns := range []string{"", "*", ">", "pay.ments", "Pay"} {
		if _, err := d.NamespaceReports(t.Context(), ns); !errors.Is(err, cuecast.ErrInvalidPath) {
			t.Errorf("NamespaceReports(%q): %v, want ErrInvalidPath", ns, err)
		}
	}
}
