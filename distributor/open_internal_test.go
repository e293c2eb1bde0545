package distributor

import (
	"context"
	"errors"
	"testing"
)

// TestOpenedIsReadOnly: the stand-in for a stream an opened Distributor
// does not manage refuses what the distributor could call on it with
// ErrReadOnly, instead of panicking on its nil embedded Stream.
func TestOpenedIsReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var s readOnlyStream
	if _, err := s.Info(ctx); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Info: %v, want ErrReadOnly", err)
	}
	if err := s.Purge(ctx); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Purge: %v, want ErrReadOnly", err)
	}
	if _, err := s.GetLastMsgForSubject(ctx, "cc.x.v.y"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("GetLastMsgForSubject: %v, want ErrReadOnly", err)
	}
	if s.CachedInfo() != nil {
		t.Error("CachedInfo of a stream Open read nothing of: not nil")
	}
}
