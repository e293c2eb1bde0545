package natstest

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestAskAgainWhileSettling: a request to a leaf's JetStream across a cut
// link finds no responder; AskAgain asks again, and once the link is
// healed (after the first miss, so no timing decides it) the leaf answers.
// An answer that is an error (a stream that does not exist) returns at
// once.
func TestAskAgainWhileSettling(t *testing.T) {
	tr := StartTree(t, TreeOptions{Leaves: 1})
	leaf := tr.Leaves[0]
	leaf.Link.Cut()
	poll.Until(t, "leaf-1 cut off", poll.Patience, func() (bool, string) {
		return !leaf.LinkedUp(), "still linked"
	})
	js, err := jetstream.NewWithDomain(tr.Hub.Connect(t, natsconf.DistributorUser), leaf.Domain())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
	defer cancel()
	tries := 0
	if _, err := AskAgain(ctx, func(ctx context.Context) (*jetstream.AccountInfo, error) {
		tries++
		info, err := js.AccountInfo(ctx)
		if tries == 1 {
			if !Transient(err) {
				t.Errorf("across a cut link: %v, want a transient error", err)
			}
			leaf.Link.Heal()
		}
		return info, err
	}); err != nil {
		t.Fatalf("leaf-1's account info after the link healed: %v", err)
	}
	if tries < 2 {
		t.Errorf("answered after %d tries, want the first missed", tries)
	}

	tries = 0
	_, err = AskAgain(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		tries++
		return js.Stream(ctx, "NOSUCH")
	})
	if !errors.Is(err, jetstream.ErrStreamNotFound) || tries != 1 {
		t.Errorf("a stream that does not exist: %v after %d tries, want %v after 1", err, tries, jetstream.ErrStreamNotFound)
	}
}
