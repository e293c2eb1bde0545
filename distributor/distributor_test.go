package distributor_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

const cfg = cuecast.ConfigPath("payments/checkout")

// newDist starts an embedded server and a distributor on it, logging to
// the test's output unless o has a Logger (a benchmark's is silent).
func newDist(t testing.TB, o distributor.Options) (*distributor.Distributor, *nats.Conn) {
	t.Helper()
	nc := natstest.Start(t).Connect(t)
	return newDistOn(t, nc, o), nc
}

// newDistOn is newDist on a connection of the test's own (through a
// natstest.Link, say).
func newDistOn(t testing.TB, nc *nats.Conn, o distributor.Options) *distributor.Distributor {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := distributor.New(t.Context(), nc, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func content(n int) []byte { return fmt.Appendf(nil, `{"n":%d}`, n) }

func version(n uint64) cuecast.Version {
	return cuecast.Version{Config: cfg, Version: n, Commit: fmt.Sprintf("c%03d", n), Author: "ann", Message: "change"}
}

func mustPublish(t *testing.T, d *distributor.Distributor, n uint64, b []byte) cuecast.Version {
	t.Helper()
	v := version(n)
	if err := d.Publish(t.Context(), v, b); err != nil {
		t.Fatalf("Publish %d: %v", n, err)
	}
	v.Checksum, v.Size = cuecast.Checksum(b), int64(len(b))
	return v
}

func TestPublish(t *testing.T) {
	t.Parallel()
	d, _ := newDist(t, distributor.Options{})
	ctx := t.Context()
	if _, err := d.Latest(ctx, cfg); !errors.Is(err, cuecast.ErrNotFound) {
		t.Fatalf("Latest of empty config: got %v, want ErrNotFound", err)
	}
	mustPublish(t, d, 1, content(1))

	other := version(1)
	other.Commit = "other"
	wrongSum := version(2)
	wrongSum.Checksum = cuecast.Checksum([]byte("something else"))
	tomb := version(2)
	tomb.Deleted = true
	tests := []struct {
		name    string
		v       cuecast.Version
		content []byte
		want    error // nil: success
	}{
		{"same version again is idempotent", version(1), content(1), nil},
		{"same number, other commit", other, content(1), cuecast.ErrConflict},
		{"same number, other content", version(1), content(99), cuecast.ErrConflict},
		{"gap in numbering", version(3), content(3), cuecast.ErrConflict},
		{"checksum does not match content", wrongSum, content(2), cuecast.ErrChecksumMismatch},
		{"invalid path", cuecast.Version{Config: "Payments", Version: 2}, content(2), cuecast.ErrInvalidPath},
		{"tombstone with content", tomb, content(2), errors.New("any")},
		{"next version", version(2), content(2), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.Publish(ctx, tt.v, tt.content)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("got %v, want success", err)
			case tt.want != nil && err == nil:
				t.Fatalf("got success, want %v", tt.want)
			case tt.want != nil && tt.want.Error() != "any" && !errors.Is(err, tt.want):
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	got, err := d.Latest(ctx, cfg)
	if err != nil {
		t.Fatalf("Latest: %v", err)
	}
	if got.Version != 2 || got.Checksum != cuecast.Checksum(content(2)) || got.Size != int64(len(content(2))) || got.Commit != "c002" {
		t.Fatalf("Latest: got %+v, want version 2 with its checksum, size and commit", got)
	}
}

// TestConcurrentPublish: of many writers of the same version number, exactly
// one wins; the others get ErrConflict (or nil when they wrote the same).
func TestConcurrentPublish(t *testing.T) {
	t.Parallel()
	d, _ := newDist(t, distributor.Options{})
	mustPublish(t, d, 1, content(1))
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			v := version(2)
			v.Commit = fmt.Sprintf("writer%d", i)
			errs[i] = d.Publish(t.Context(), v, content(100+i))
		})
	}
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, cuecast.ErrConflict):
			t.Errorf("writer %d: got %v, want nil or ErrConflict", i, err)
		}
	}
	if wins != 1 {
		t.Fatalf("got %d winners, want 1 (errors %v)", wins, errs)
	}
	vs, err := d.Versions(t.Context(), cfg)
	if err != nil || len(vs) != 2 {
		t.Fatalf("Versions: got %d versions, %v; want 2", len(vs), err)
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	d, nc := newDist(t, distributor.Options{Retain: 3})
	ctx := t.Context()
	big := bytes.Repeat([]byte("x"), distributor.ChunkThreshold+10)
	for n := uint64(1); n <= 6; n++ {
		b := content(int(n))
		if n%2 == 0 {
			b = append(fmt.Appendf(nil, "%d", n), big...) // chunked
		}
		mustPublish(t, d, n, b)
	}
	vs, err := d.Versions(ctx, cfg)
	if err != nil {
		t.Fatalf("Versions: %v", err)
	}
	var nums []uint64
	for _, v := range vs {
		nums = append(nums, v.Version)
	}
	if fmt.Sprint(nums) != "[6 5 4]" {
		t.Fatalf("Versions: got %v, want [6 5 4]", nums)
	}
	tests := []struct {
		n    uint64
		want error
	}{
		{1, cuecast.ErrPurged}, {3, cuecast.ErrPurged}, {4, nil}, {5, nil}, {6, nil}, {7, cuecast.ErrNotFound}, {0, cuecast.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			v, b, err := d.Version(ctx, cfg, tt.n)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err == nil && (v.Version != tt.n || cuecast.Checksum(b) != v.Checksum) {
				t.Fatalf("got version %d checksum %s for %d bytes, want %d with matching content", v.Version, v.Checksum, len(b), tt.n)
			}
		})
	}
	// Chunks of purged versions are gone: versions 4 and 6 keep two each.
	js := natstest.JetStream(t, nc)
	st, err := js.Stream(ctx, cuecast.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("cc.payments.c.checkout"))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Subjects["cc.payments.c.checkout"]; got != 4 {
		t.Fatalf("chunks retained: got %d, want 4", got)
	}
}

// pointers reads all bucket pointers of cfg.
func pointers(t *testing.T, d *distributor.Distributor) []cuecast.Pointer {
	t.Helper()
	out := make([]cuecast.Pointer, cuecast.Buckets)
	for b := range cuecast.Buckets {
		p, err := d.Pointer(t.Context(), cfg, b)
		if err != nil {
			t.Fatalf("Pointer bucket %d: %v", b, err)
		}
		out[b] = p
	}
	return out
}

func lastSeq(t *testing.T, nc *nats.Conn) uint64 {
	t.Helper()
	js := natstest.JetStream(t, nc)
	st, err := js.Stream(t.Context(), cuecast.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

func TestDeployAndPointers(t *testing.T) {
	t.Parallel()
	d, nc := newDist(t, distributor.Options{})
	ctx := t.Context()
	if _, err := d.Pointer(ctx, cfg, 3); !errors.Is(err, cuecast.ErrNotFound) {
		t.Fatalf("Pointer before deploy: got %v, want ErrNotFound", err)
	}
	if err := d.Deploy(ctx, version(1)); !errors.Is(err, cuecast.ErrNotFound) {
		t.Fatalf("Deploy of unpublished version: got %v, want ErrNotFound", err)
	}
	v1 := mustPublish(t, d, 1, content(1))
	v2 := mustPublish(t, d, 2, content(2))

	steps := []struct {
		name      string
		do        func() error
		want      uint64 // version every bucket must name afterwards
		rollback  bool
		noWrites  bool
		wantError error
	}{
		{name: "deploy v1", do: func() error { return d.Deploy(ctx, v1) }, want: 1},
		{name: "deploy v1 again writes nothing", do: func() error { return d.Deploy(ctx, v1) }, want: 1, noWrites: true},
		{name: "deploy v2", do: func() error { return d.Deploy(ctx, v2) }, want: 2},
		{name: "deploy v1 does not move buckets back", do: func() error { return d.Deploy(ctx, v1) }, want: 2, noWrites: true},
		{name: "deploy with a wrong checksum", do: func() error {
			v := v2
			v.Checksum = cuecast.Checksum([]byte("x"))
			return d.Deploy(ctx, v)
		}, want: 2, noWrites: true, wantError: cuecast.ErrConflict},
		{name: "rollback pointer to v1", do: func() error {
			all := make([]int, cuecast.Buckets)
			for i := range all {
				all[i] = i
			}
			return d.SetPointers(ctx, cfg, all, cuecast.Pointer{Version: 1, Rollback: true, Reason: "incident"})
		}, want: 1, rollback: true},
		{name: "deploy v2 supersedes the rollback", do: func() error { return d.Deploy(ctx, v2) }, want: 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := lastSeq(t, nc)
			err := st.do()
			if st.wantError == nil && err != nil || st.wantError != nil && !errors.Is(err, st.wantError) {
				t.Fatalf("got %v, want %v", err, st.wantError)
			}
			if after := lastSeq(t, nc); st.noWrites && after != before {
				t.Fatalf("stream moved from %d to %d, want no writes", before, after)
			}
			for b, p := range pointers(t, d) {
				want := map[uint64]cuecast.Version{1: v1, 2: v2}[st.want]
				if p.Version != st.want || p.Checksum != want.Checksum || p.Rollback != st.rollback || p.Seq == 0 || p.Config != cfg {
					t.Fatalf("bucket %d: got %+v, want version %d rollback %t", b, p, st.want, st.rollback)
				}
			}
		})
	}
}

// TestSetPointersConflict: a stale compare-and-swap loses.
func TestSetPointersErrors(t *testing.T) {
	t.Parallel()
	d, _ := newDist(t, distributor.Options{})
	ctx := t.Context()
	mustPublish(t, d, 1, content(1))
	tests := []struct {
		name    string
		buckets []int
		p       cuecast.Pointer
		want    error
	}{
		{"bucket out of range", []int{100}, cuecast.Pointer{Version: 1}, errors.New("any")},
		{"unknown version", []int{1}, cuecast.Pointer{Version: 9}, cuecast.ErrNotFound},
		{"pointer for another config", []int{1}, cuecast.Pointer{Config: "search/ranking", Version: 1}, errors.New("any")},
		{"valid", []int{1, 2}, cuecast.Pointer{Version: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.SetPointers(ctx, cfg, tt.buckets, tt.p)
			if tt.want == nil && err != nil || tt.want != nil && (err == nil || tt.want.Error() != "any" && !errors.Is(err, tt.want)) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestConfigs(t *testing.T) {
	t.Parallel()
	d, _ := newDist(t, distributor.Options{})
	ctx := t.Context()
	for _, p := range []cuecast.ConfigPath{"search/ranking", "payments/checkout", "payments/fraud/rules"} {
		if err := d.Publish(ctx, cuecast.Version{Config: p, Version: 1, Commit: "c1"}, content(1)); err != nil {
			t.Fatalf("Publish %s: %v", p, err)
		}
	}
	got, err := d.Configs(ctx)
	if err != nil {
		t.Fatalf("Configs: %v", err)
	}
	if fmt.Sprint(got) != "[payments/checkout payments/fraud/rules search/ranking]" {
		t.Fatalf("Configs: got %v", got)
	}
}

func publishReport(t *testing.T, nc *nats.Conn, r cuecast.Report) {
	t.Helper()
	b, _ := json.Marshal(r)
	subj := fmt.Sprintf("ccs.%s.%s.%s", r.Config.Namespace(), r.Instance, r.Config.Tokens()[len(r.Config.Namespace())+1:])
	js := natstest.JetStream(t, nc)
	if _, err := js.Publish(t.Context(), subj, b); err != nil {
		t.Fatalf("publish report: %v", err)
	}
}

func TestReportsAndStatus(t *testing.T) {
	t.Parallel()
	d, nc := newDist(t, distributor.Options{StragglerAfter: time.Nanosecond})
	ctx := t.Context()
	mustPublish(t, d, 1, content(1))
	v2 := mustPublish(t, d, 2, content(2))
	other := cuecast.ConfigPath("search/ranking")
	if err := d.Publish(ctx, cuecast.Version{Config: other, Version: 1, Commit: "c1"}, content(7)); err != nil {
		t.Fatal(err)
	}
	reports := []cuecast.Report{
		{Instance: "a", Config: cfg, Version: 2, Checksum: v2.Checksum, Healthy: true},
		{Instance: "b", Config: cfg, Version: 2, Checksum: v2.Checksum, Healthy: false},
		{Instance: "c", Config: cfg, Version: 1, Checksum: cuecast.Checksum(content(1)), Healthy: true, LastKnownGood: true},
		{Instance: "d", Config: cfg, Version: 1, Checksum: cuecast.Checksum(content(1)), Healthy: true, LastError: "version 2: validation hook: no"},
		{Instance: "a", Config: other, Version: 1, Checksum: cuecast.Checksum(content(7)), Healthy: true},
	}
	// An older report of "a" is replaced by its newer one (keep-last-1).
	publishReport(t, nc, cuecast.Report{Instance: "a", Config: cfg, Version: 1, Healthy: true})
	for _, r := range reports {
		publishReport(t, nc, r)
	}
	got, err := d.Reports(ctx, cfg)
	if err != nil {
		t.Fatalf("Reports: %v", err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, fmt.Sprintf("%s@%d", r.Instance, r.Version))
	}
	if fmt.Sprint(ids) != "[a@2 b@2 c@1 d@1]" {
		t.Fatalf("Reports(%s): got %v, want [a@2 b@2 c@1 d@1]", cfg, ids)
	}
	all, err := d.Reports(ctx, "")
	if err != nil || len(all) != 5 {
		t.Fatalf("Reports(all): got %d, %v; want 5", len(all), err)
	}

	sts, err := d.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if len(sts) != 2 {
		t.Fatalf("Status: got %d configs, want 2", len(sts))
	}
	st := sts[0]
	if st.Config != cfg || st.Latest.Version != 2 || st.Instances != 4 || st.OnLatest != 2 || st.Behind != 2 ||
		st.Unhealthy != 1 || st.Failing != 1 || len(st.Stragglers) != 2 || len(st.LastKnownGood) != 1 || st.Coverage != 0.5 {
		t.Fatalf("Status(%s): got %+v", cfg, st)
	}
	if sts[1].Config != other || sts[1].Instances != 1 || sts[1].OnLatest != 1 {
		t.Fatalf("Status(%s): got %+v", other, sts[1])
	}
	if _, err := d.Status(ctx, "payments/nothing"); !errors.Is(err, cuecast.ErrNotFound) {
		t.Fatalf("Status of unknown config: got %v, want ErrNotFound", err)
	}
	empty, err := d.Status(ctx, other)
	if err != nil || len(empty) != 1 {
		t.Fatalf("Status(one): got %v, %v", empty, err)
	}
}

func TestSigning(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := newDist(t, distributor.Options{SigningKey: kp})
	pub, _ := kp.PublicKey()
	if d.PublicKey() != pub {
		t.Fatalf("PublicKey: got %q, want %q", d.PublicKey(), pub)
	}
	ctx := t.Context()
	mustPublish(t, d, 1, content(1))
	v, _, err := d.Version(ctx, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(pub, v.SigningBytes(), v.Signature); err != nil {
		t.Fatalf("version signature: %v", err)
	}
	if err := d.Deploy(ctx, v); err != nil {
		t.Fatal(err)
	}
	p, err := d.Pointer(ctx, cfg, 42)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(pub, p.SigningBytes(), p.Signature); err != nil {
		t.Fatalf("pointer signature: %v", err)
	}
	p.Version++
	if err := verify(pub, p.SigningBytes(), p.Signature); err == nil {
		t.Fatal("altered pointer verifies, want failure")
	}

	pubOnly, _ := nkeys.FromPublicKey(pub)
	if _, err := distributor.New(ctx, natstest.Start(t).Connect(t), distributor.Options{SigningKey: pubOnly}); err == nil {
		t.Fatal("New with a public key as signing key: got success, want error")
	}
}

func verify(pub string, data []byte, sig string) error {
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return err
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return err
	}
	return kp.Verify(data, raw)
}

func TestLoadOrCreateKey(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/keys/signing.nk"
	kp, created, err := distributor.LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first call: got created %t, %v; want a new key", created, err)
	}
	again, created, err := distributor.LoadOrCreateKey(path)
	if err != nil || created {
		t.Fatalf("second call: got created %t, %v; want the stored key", created, err)
	}
	p1, _ := kp.PublicKey()
	p2, _ := again.PublicKey()
	if p1 != p2 || p1[0] != 'A' {
		t.Fatalf("public keys: got %s and %s, want the same account key", p1, p2)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: got %v, %v; want 0600", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".signing-key-*")); len(left) != 0 {
		t.Fatalf("temporary files left beside the key: %v", left)
	}
	if err := os.WriteFile(path, []byte("not a seed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := distributor.LoadOrCreateKey(path); err == nil {
		t.Fatal("corrupt key file: got success, want error")
	}
}

// TestTwoWriters: a second Distributor moving the pointers is never
// overwritten by stale knowledge of the first.
func TestTwoWriters(t *testing.T) {
	t.Parallel()
	_, d1, d2 := twoDistributors(t, distributor.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	ctx := t.Context()
	v1 := mustPublish(t, d1, 1, content(1))
	v2 := mustPublish(t, d1, 2, content(2))
	all := make([]int, cuecast.Buckets)
	for i := range all {
		all[i] = i
	}
	steps := []struct {
		name string
		do   func() error
		want uint64
	}{
		{"d1 deploys v2", func() error { return d1.Deploy(ctx, v2) }, 2},
		{"d2 rolls back to v1", func() error {
			return d2.SetPointers(ctx, cfg, all, cuecast.Pointer{Version: 1, Rollback: true})
		}, 1},
		{"d1 deploys v2 again", func() error { return d1.Deploy(ctx, v2) }, 2},
		{"d2 deploys v1 without rollback: no bucket moves back", func() error { return d2.Deploy(ctx, v1) }, 2},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for b, p := range pointers(t, d1) {
			if p.Version != st.want {
				t.Fatalf("%s: bucket %d on version %d, want %d", st.name, b, p.Version, st.want)
			}
		}
	}
}

// TestPublishStaleCache: a Distributor whose idea of the latest version is
// stale (another process published since) still publishes correctly.
func TestPublishStaleCache(t *testing.T) {
	t.Parallel()
	_, d1, d2 := twoDistributors(t, distributor.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	mustPublish(t, d1, 1, content(1))
	mustPublish(t, d2, 2, content(2)) // d1 still believes 1 is the latest
	other := version(2)
	other.Commit = "elsewhere"
	tests := []struct {
		name    string
		v       cuecast.Version
		content []byte
		want    error
	}{
		{"the same version 2 again is idempotent", version(2), content(2), nil},
		{"a different version 2 conflicts", other, content(22), cuecast.ErrConflict},
		{"version 3 follows", version(3), content(3), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := d1.Publish(t.Context(), tt.v, tt.content); tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if err := d1.Deploy(t.Context(), version(3)); err != nil {
		t.Fatalf("Deploy 3: %v", err)
	}
	if p, err := d2.Pointer(t.Context(), cfg, 0); err != nil || p.Version != 3 {
		t.Fatalf("pointer after deploy: got %+v, %v; want version 3", p, err)
	}
}

// TestInlinePointers: a version no larger than InlineLimit rides in every
// pointer message (Cuecast-Pointer header, content as the body), whether
// deployed, set by SetPointers (read back from the stream, not the cache of
// the latest) or rolled back to; a larger one, or any with inlining off,
// is named only.
func TestInlinePointers(t *testing.T) {
	t.Parallel()
	small, large := content(1), bytes.Repeat([]byte("x"), 300)
	large[0], large[len(large)-1] = '"', '"'
	tests := []struct {
		name   string
		limit  int
		body   []byte
		inline bool
	}{
		{"small", 0, small, true},
		{"at the limit", len(large), large, true},
		{"over the limit", len(large) - 1, large, false},
		{"inlining off", -1, small, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, nc := newDist(t, distributor.Options{InlineLimit: tt.limit})
			js, _ := jetstream.New(nc)
			st, _ := js.Stream(t.Context(), cuecast.Stream)
			check := func(bucket string, want uint64, wantBody []byte) {
				t.Helper()
				m, err := st.GetLastMsgForSubject(t.Context(), "cc.payments.p."+bucket+".checkout")
				if err != nil {
					t.Fatal(err)
				}
				var p cuecast.Pointer
				if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderPointer)), &p); err != nil {
					t.Fatalf("pointer header: %v", err)
				}
				if p.Version != want || p.Commit != version(want).Commit || p.Inline != tt.inline {
					t.Fatalf("bucket %s: got %+v, want version %d commit %s inline %t", bucket, p, want, version(want).Commit, tt.inline)
				}
				if tt.inline && !bytes.Equal(m.Data, wantBody) {
					t.Fatalf("bucket %s body: got %q, want %q", bucket, m.Data, wantBody)
				}
				if !tt.inline && len(m.Data) != 0 {
					t.Fatalf("bucket %s body: got %d bytes, want none", bucket, len(m.Data))
				}
			}
			v1 := mustPublish(t, d, 1, tt.body)
			if err := d.Deploy(t.Context(), v1); err != nil {
				t.Fatal(err)
			}
			check("all", 1, tt.body)
			second := bytes.Clone(tt.body)
			second[len(second)-2]++ // same size, other bytes
			mustPublish(t, d, 2, second)
			if err := d.SetPointers(t.Context(), cfg, []int{3}, cuecast.Pointer{Version: 2}); err != nil {
				t.Fatal(err)
			}
			check("3", 2, second)
			if err := d.SetPointers(t.Context(), cfg, []int{3}, cuecast.Pointer{Version: 1, Rollback: true}); err != nil {
				t.Fatal(err)
			}
			check("3", 1, tt.body)
		})
	}
}

// TestAllBucketsPointer: moving every bucket is one write on the subject of
// all buckets, which every instance follows beside its bucket's own; what a
// bucket runs is the newer of the two, and writes are skipped only when that
// already says the same.
func TestAllBucketsPointer(t *testing.T) {
	t.Parallel()
	d, nc := newDist(t, distributor.Options{})
	ctx := t.Context()
	v1, v2 := mustPublish(t, d, 1, content(1)), mustPublish(t, d, 2, content(2))
	mustPublish(t, d, 3, content(3))
	writes := func(act func()) uint64 {
		t.Helper()
		before := lastSeq(t, nc)
		act()
		return lastSeq(t, nc) - before
	}
	runs := func(bucket int, want uint64, rollback bool) {
		t.Helper()
		p, err := d.Pointer(ctx, cfg, bucket)
		if err != nil || p.Version != want || p.Rollback != rollback {
			t.Fatalf("bucket %d runs %+v (%v), want v%d rollback=%t", bucket, p, err, want, rollback)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	every := make([]int, cuecast.Buckets)
	for i := range every {
		every[i] = i
	}

	if n := writes(func() { must(d.Deploy(ctx, v1)) }); n != 1 {
		t.Fatalf("Deploy to an empty fleet: %d writes, want 1 (all buckets)", n)
	}
	runs(0, 1, false)
	runs(99, 1, false)
	if n := writes(func() { must(d.Deploy(ctx, v1)) }); n != 0 {
		t.Fatalf("Deploy again: %d writes, want none", n)
	}

	// A canary bucket on a newer version: Deploy never moves it back, so
	// the other 99 are written one by one.
	must(d.SetPointers(ctx, cfg, []int{5}, cuecast.Pointer{Version: 3}))
	runs(5, 3, false)
	if n := writes(func() { must(d.Deploy(ctx, v2)) }); n != 99 {
		t.Fatalf("Deploy past a newer canary: %d writes, want 99", n)
	}
	runs(5, 3, false)
	runs(6, 2, false)

	// Every bucket at once, one already there: one write.
	if n := writes(func() { must(d.SetPointers(ctx, cfg, every, cuecast.Pointer{Version: 3})) }); n != 1 {
		t.Fatalf("SetPointers on every bucket: %d writes, want 1", n)
	}
	runs(5, 3, false)
	runs(6, 3, false)

	// A bucket whose own (older) pointer says v2 runs v3 through the all
	// pointer: setting it to v2 is a real move, not a no-op.
	if n := writes(func() { must(d.SetPointers(ctx, cfg, []int{6}, cuecast.Pointer{Version: 2, Rollback: true})) }); n != 1 {
		t.Fatalf("SetPointers on a bucket the all pointer overrides: %d writes, want 1", n)
	}
	runs(6, 2, true)
	runs(7, 3, false)

	// An instance already running p through the all pointer needs no
	// pointer of its own; one whose bucket runs something else does.
	id7, id6 := instanceIn(t, 7), instanceIn(t, 6)
	if n := writes(func() { must(d.SetInstancePointers(ctx, cfg, []string{id7}, cuecast.Pointer{Version: 3})) }); n != 0 {
		t.Fatalf("instance pointer equal to what it runs: %d writes, want none", n)
	}
	if n := writes(func() { must(d.SetInstancePointers(ctx, cfg, []string{id6}, cuecast.Pointer{Version: 3})) }); n != 1 {
		t.Fatalf("instance pointer over its bucket's: %d writes, want 1", n)
	}

	// Every bucket runs v3, but an instance's own pointer names v2: setting
	// every bucket to v3 still writes, and being newest, reaches it.
	must(d.SetPointers(ctx, cfg, every, cuecast.Pointer{Version: 3}))
	must(d.SetInstancePointers(ctx, cfg, []string{id7}, cuecast.Pointer{Version: 2, Rollback: true}))
	if n := writes(func() { must(d.SetPointers(ctx, cfg, every, cuecast.Pointer{Version: 3})) }); n != 1 {
		t.Fatalf("SetPointers on every bucket, each already there: %d writes, want 1 (it must override instance pointers)", n)
	}
}

// instanceIn returns an instance ID of cfg's namespace in bucket b.
func instanceIn(t *testing.T, b int) string {
	t.Helper()
	for i := range 100000 {
		if id := fmt.Sprintf("web-%d", i); cuecast.Cohort(cfg.Namespace(), id) == b {
			return id
		}
	}
	t.Fatalf("no instance in bucket %d", b)
	return ""
}

// TestAllBucketsPointerDropsInstancePointers: an all-buckets pointer
// supersedes every instance pointer stored before it, so those are purged
// (each may carry up to InlineLimit of content, and every instance a stage
// ever named would otherwise keep one); an instance can be named again
// afterwards, by this distributor and by a fresh one.
func TestAllBucketsPointerDropsInstancePointers(t *testing.T) {
	t.Parallel()
	d, nc := newDist(t, distributor.Options{})
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	stored := func(d *distributor.Distributor, id string) (cuecast.Pointer, bool) {
		t.Helper()
		p, err := d.InstancePointer(ctx, cfg, id)
		if errors.Is(err, cuecast.ErrNotFound) {
			return p, false
		}
		must(err)
		return p, true
	}
	every := make([]int, cuecast.Buckets)
	for i := range every {
		every[i] = i
	}
	v1 := mustPublish(t, d, 1, content(1))
	mustPublish(t, d, 2, content(2))
	must(d.Deploy(ctx, v1))
	a, b := instanceIn(t, 3), instanceIn(t, 4)
	must(d.SetInstancePointers(ctx, cfg, []string{a, b}, cuecast.Pointer{Version: 2}))
	for _, id := range []string{a, b} {
		if p, ok := stored(d, id); !ok || p.Version != 2 {
			t.Fatalf("instance %s: pointer %+v (stored %t), want v2", id, p, ok)
		}
	}

	must(d.SetPointers(ctx, cfg, every, cuecast.Pointer{Version: 2}))
	for _, id := range []string{a, b} {
		if p, ok := stored(d, id); ok {
			t.Fatalf("instance %s: pointer %+v kept after the all-buckets pointer superseded it", id, p)
		}
	}
	if p, err := d.Pointer(ctx, cfg, 3); err != nil || p.Version != 2 {
		t.Fatalf("bucket 3 runs %+v (%v), want v2", p, err)
	}

	// Named again: a compare-and-swap on a purged subject, whose cached
	// sequence must not be used.
	must(d.SetInstancePointers(ctx, cfg, []string{a}, cuecast.Pointer{Version: 1, Rollback: true}))
	if p, ok := stored(d, a); !ok || p.Version != 1 || !p.Rollback {
		t.Fatalf("instance %s named again: pointer %+v (stored %t), want v1 rollback", a, p, ok)
	}
	fresh, err := distributor.New(ctx, nc, distributor.Options{})
	must(err)
	defer fresh.Close()
	must(fresh.SetInstancePointers(ctx, cfg, []string{b}, cuecast.Pointer{Version: 1, Rollback: true}))
	if p, ok := stored(fresh, b); !ok || p.Version != 1 {
		t.Fatalf("instance %s named by a fresh distributor: pointer %+v (stored %t), want v1", b, p, ok)
	}
}

// TestRevisionsRiseAcrossWriters: every pointer write of a config gets a
// revision above every earlier one, on any of its subjects, whichever
// Distributor writes it and however wrong its clock: a serve restart or a
// failover to a replica whose clock is an hour behind must not write
// pointers that subscribers rank below older ones (they follow the highest
// revision, docs/PROTOCOL.md §5).
func TestRevisionsRiseAcrossWriters(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	newD := func(skew time.Duration) *distributor.Distributor {
		d, err := distributor.New(ctx, s.Connect(t), distributor.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		distributor.SkewClock(d, skew)
		return d
	}
	ahead, behind, far := newD(time.Hour), newD(-time.Hour), newD(-48*time.Hour)
	v1 := mustPublish(t, ahead, 1, content(1))
	v2 := mustPublish(t, ahead, 2, content(2))
	js, _ := jetstream.New(s.Connect(t))
	st, err := js.Stream(ctx, "CUECAST")
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	check := func(step, subj string) {
		t.Helper()
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			t.Fatalf("%s: read %s: %v", step, subj, err)
		}
		var p cuecast.Pointer
		if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderPointer)), &p); err != nil {
			t.Fatal(err)
		}
		if p.Revision <= last || p.Subject != subj {
			t.Fatalf("%s: pointer on %s has revision %d, subject %q; want above %d, %s", step, subj, p.Revision, p.Subject, last, subj)
		}
		last = p.Revision
	}
	if err := ahead.Deploy(ctx, v1); err != nil {
		t.Fatal(err)
	}
	check("deploy by the replica an hour ahead", cuecast.AllPointerSubject(cfg))
	if err := behind.SetPointers(ctx, cfg, []int{7}, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	check("bucket pointer by the replica an hour behind", cuecast.PointerSubject(cfg, 7))
	if err := far.SetInstancePointers(ctx, cfg, []string{"web-1"}, cuecast.Pointer{Version: 1, Rollback: true}); err != nil {
		t.Fatal(err)
	}
	check("instance pointer by the replica two days behind", cuecast.InstancePointerSubject(cfg, "web-1"))
	if err := behind.Stage(ctx, cfg, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	check("staged pointer", cuecast.StagedSubject(cfg))
	if err := far.Activate(ctx, cfg, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	check("activation pointer", cuecast.ActivationSubject(cfg))
	if err := behind.Deploy(ctx, v2); err != nil {
		t.Fatal(err)
	}
	check("deploy by the replica behind", cuecast.AllPointerSubject(cfg))
	// What subscribers of bucket 7 and of web-1 run is what Pointer and
	// InstancePointer say: the newest by revision.
	if p, err := ahead.Pointer(ctx, cfg, 7); err != nil || p.Version != 2 || p.Revision != last {
		t.Fatalf("Pointer(bucket 7): %+v, %v; want the last write, version 2", p, err)
	}
}

// TestTrustedKeysFile: what serve and `cuecast keys` do to <data>/trusted-keys
// over a rotation: the first key creates it, the next is added beside it
// (idempotently, as every serve start adds its key), retiring removes one
// but never the last.
func TestTrustedKeysFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", distributor.TrustedKeysFile)
	pub := func() string {
		kp, err := nkeys.CreateAccount()
		if err != nil {
			t.Fatal(err)
		}
		p, _ := kp.PublicKey()
		return p
	}
	oldPub, newPub := pub(), pub()
	if _, err := distributor.ReadTrustedKeys(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read before serve: %v, want ErrNotExist", err)
	}
	for _, step := range []struct {
		name string
		do   func() ([]string, error)
		want []string
	}{
		{"first start", func() ([]string, error) { return distributor.TrustKey(path, oldPub) }, []string{oldPub}},
		{"restart", func() ([]string, error) { return distributor.TrustKey(path, oldPub) }, []string{oldPub}},
		{"keys new", func() ([]string, error) { return distributor.TrustKey(path, newPub) }, []string{oldPub, newPub}},
		{"restart with the new key", func() ([]string, error) { return distributor.TrustKey(path, newPub) }, []string{oldPub, newPub}},
		{"retire the old key", func() ([]string, error) { return distributor.RetireKey(path, oldPub) }, []string{newPub}},
	} {
		got, err := step.do()
		if err != nil || !slices.Equal(got, step.want) {
			t.Fatalf("%s: %v, %v; want %v", step.name, got, err, step.want)
		}
		if read, err := distributor.ReadTrustedKeys(path); err != nil || !slices.Equal(read, step.want) {
			t.Fatalf("%s: file lists %v, %v; want %v", step.name, read, err, step.want)
		}
	}
	if _, err := distributor.RetireKey(path, newPub); err == nil {
		t.Fatal("retiring the last key: got success, want refusal")
	}
	// Retired already: said as such, with what the file lists, not as a
	// missing file.
	if _, err := distributor.RetireKey(path, oldPub); !errors.Is(err, distributor.ErrNotListed) || errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), newPub) {
		t.Fatalf("retiring a retired key: %v; want ErrNotListed naming %s", err, newPub)
	}
	if _, err := distributor.TrustKey(path, "SAAACAQDAQCQMBYIBEFAWDANBYHRAEISCMKBKFQXDAMRUGY4DUPB6IFO3A"); err == nil {
		t.Fatal("trusting a seed: got success, want refusal")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("file mode: %v, %v; want 0644", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".trusted-keys-*")); len(left) != 0 {
		t.Fatalf("temporary files left beside the file: %v", left)
	}
}

// TestTrustedKeysFileEmpty: a trusted-keys file that lists no key (emptied
// by hand, or only comments) reads as no keys, not as an error, so serve
// still adds its key on start (docs/OPERATIONS.md, "Keys"); a client given
// the same file refuses to start (client/integration: TestOptionsValidate).
func TestTrustedKeysFileEmpty(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	for _, content := range []string{"", "# Public keys that verify what cuecast serve signs\n\n"} {
		path := filepath.Join(t.TempDir(), distributor.TrustedKeysFile)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if keys, err := distributor.ReadTrustedKeys(path); err != nil || len(keys) != 0 {
			t.Fatalf("read %q: %v, %v; want no keys and no error", content, keys, err)
		}
		if keys, err := distributor.TrustKey(path, pub); err != nil || !slices.Equal(keys, []string{pub}) {
			t.Fatalf("serve starting over %q: %v, %v; want [%s]", content, keys, err, pub)
		}
	}
}

// TestForgedRepublishLeavesCacheAlone: the Distributor follows the
// RePublished pointers to keep its compare-and-swap expectations current.
// A genuine old pointer re-sent on ccr.> with a forged Nats-Sequence used to
// become the sequence its next write on that subject expected, so the write
// failed with a conflict (and every one after it, while the replays went
// on). Only a pointer signed for its subject with a newer revision moves
// the cache now.
func TestForgedRepublishLeavesCacheAlone(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	ctx := t.Context()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	d, err := distributor.New(ctx, s.Connect(t), distributor.Options{Logger: log, SigningKey: kp})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	other, err := distributor.New(ctx, s.Connect(t), distributor.Options{Logger: log, SigningKey: kp})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	mustPublish(t, d, 1, content(1))
	mustPublish(t, d, 2, content(2))
	if err := d.SetPointers(ctx, cfg, []int{3}, cuecast.Pointer{Version: 1}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(s.Connect(t))
	st, err := js.Stream(ctx, "CUECAST")
	if err != nil {
		t.Fatal(err)
	}
	subj := cuecast.PointerSubject(cfg, 3)
	real, err := st.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	attacker := s.Connect(t)
	for _, h := range []map[string]string{
		{"Nats-Sequence": "999999999"},                                      // the real pointer, again
		{"Nats-Sequence": "999999999", "Cuecast-Pointer": `{"config":"x"}`}, // garbage
	} {
		m := nats.NewMsg("ccr" + subj[2:])
		m.Header.Set(cuecast.HeaderPointer, real.Header.Get(cuecast.HeaderPointer))
		m.Header.Set("Nats-Subject", subj)
		for k, v := range h {
			m.Header.Set(k, v)
		}
		if err := attacker.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}
	// Another writer moves bucket 4: d learns of it only by following, on
	// the same subscription, after the forged messages.
	if err := other.SetPointers(ctx, cfg, []int{4}, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	want, err := st.GetLastMsgForSubject(ctx, cuecast.PointerSubject(cfg, 4))
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "d following the other writer", 20*time.Second, func() (bool, string) {
		got := distributor.CachedSeq(d, cuecast.PointerSubject(cfg, 4))
		return got == want.Sequence, fmt.Sprintf("cached %d, want %d", got, want.Sequence)
	})
	if got := distributor.CachedSeq(d, subj); got != real.Sequence {
		t.Fatalf("cache for %s: sequence %d, want the stored %d", subj, got, real.Sequence)
	}
	if err := d.SetPointers(ctx, cfg, []int{3}, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatalf("write after the replays: %v", err)
	}
}
