// Package distributor stores config versions and cohort pointers in
// JetStream and reads back what the fleet reports.
//
// It owns the wire layout specified in docs/PROTOCOL.md: one stream,
// CUECAST, holds versions (create-only, numbered without gaps), the chunks
// of large versions, and one pointer per config and cohort bucket
// (compare-and-swap); the stream RePublishes everything onto core subjects
// (ccr.>) that instances subscribe to, so no instance needs a JetStream
// consumer. Reports live in CUECAST_REPORTS, keep-last-1 per instance and
// config, expiring after four heartbeats.
//
//	d, err := distributor.New(ctx, nc, distributor.Options{Logger: log})
//	v := cuecast.Version{Config: "payments/checkout", Version: 1, Commit: sha}
//	err = d.Publish(ctx, v, content) // cuecast.ErrConflict if someone else wrote version 1
//	err = d.Deploy(ctx, v)          // every cohort bucket now points at version 1
//	st, err := d.Status(ctx)        // coverage, stragglers, last-known-good instances
//
// Status and Reports read the report stream with a consumer each time. A
// caller that looks again and again (a deploy waiting for its version)
// uses WatchReports instead: one read, then the reports as they arrive on
// core NATS, in a ReportWatcher whose Live costs nothing.
//
// The signing key (Options.SigningKey, an nkeys seed; LoadOrCreateKey keeps
// one in a file) signs every version and pointer. A Distributor remembers
// the latest version of each config and the current pointers (kept in step
// with other writers by a core subscription to the RePublished pointers), so
// a publish need not read the previous version nor a deploy the pointers it
// replaces: they give each write's expected last sequence, and every write
// is a compare-and-swap on the server, a lost one reading afresh. A pointer
// write still reads the stored revisions first (nextRevisions), so that
// revisions rise across a restart or a failover. Close stops that
// subscription.
//
// A Distributor is safe for concurrent use. Every method takes a context
// that bounds its requests. Errors wrap the sentinels of package cuecast:
// ErrNotFound (no such config, version or pointer), ErrConflict (a lost
// create-only or compare-and-swap write), ErrFenced (a version refused
// because a later lease term claimed the writer fence: ClaimFence),
// ErrPurged (a version removed by retention), ErrChecksumMismatch (content
// that does not match its metadata), ErrInvalidPath.
package distributor
