// Package client is what a service embeds to receive its configs from
// cuecast: it starts from a last-known-good file before it reads any
// pointer (for a config that may have variants, after one read of its
// newest version when connected, which picks the variant), then
// follows its cohort's pointer, verifies each version (the distributor's
// ed25519 signature, and the checksum it signs), runs the
// service's validation hook, swaps the value atomically, saves it as the new
// last-known-good file and reports back.
//
//	nc, err := nats.Connect(url, client.ConnectOptions()...)
//	c, err := client.New(nc, client.WithInstance("checkout-7f9c"),
//		client.WithTrustedKeysFile("/etc/cuecast/trusted-keys")) // serve's <data>/trusted-keys
//	w, err := c.Watch(ctx, "payments/checkout", client.LastKnownGood("/var/lib/checkout/config.lkg"))
//	defer w.Stop()
//	if err := w.WaitReady(ctx); err != nil { ... } // errors.Is(err, client.ErrNotReady)
//	cfg := w.Current() // never blocks; zero before any version is known
//	for s := range w.Updates() { ... }
//
// Ready and WaitReady: Current is the zero Snapshot until the watcher has a
// verified version, either the first one read from the server or a
// last-known-good file that verified at start. Ready() is a channel closed
// at that moment; WaitReady(ctx) waits for it and returns an error wrapping
// ErrNotReady (and ctx's error) when ctx ends first. While it waits, the
// events (WithEvents) say why: EventNotFound when nothing is deployed to
// this instance (a misspelt config path, or a rollout not at its cohort
// yet), EventError for reads that fail. Example shows it end to end.
//
// Or decode into a struct with Typed:
//
//	tw, err := client.Typed[Checkout](ctx, c, "payments/checkout",
//		client.ValidateValue(func(c Checkout) error { ... }))
//	v, snap := tw.Value()
//	for u := range tw.Updates() { use(u.Value, u.Version) }
//
// Typed decodes leniently: a field the config has and Checkout does not is
// ignored, so a config that gains a field (a compatible change for
// `cuecast check`) is applied by services built before it. StrictDecoding
// refuses such a version instead (reported as rejected, which a staged
// rollout's health gate counts), for a service that must understand every
// field. Validate checks the content's bytes, ValidateValue the decoded
// value; a version either refuses is not applied.
//
// Signatures: a Client needs trusted keys (WithTrustedKeysFile with the file
// `cuecast serve` writes to <data>/trusted-keys and `cuecast keys` prints,
// WithTrustedKeys, or a Keyring shared by the Clients of one process,
// WithKeyring); New refuses to build one without them (ErrNoTrustedKeys)
// unless told WithInsecureSkipVerify, which is for tests. Every pointer must
// carry a valid signature of a trusted key; the pointer's signed checksum and
// size then authenticate the content, and the signed pointer kept in the
// last-known-good file guards that file. Versions only move forward unless a (signed) pointer says rollback;
// the watcher keeps the previous version so that a rollback to it needs no
// read.
//
// Variants: a config that varies by dimensions (env, region…) is published
// once per variant at its variant path (payments/checkout/env=prod/region=eu),
// with a variant index at the base path. An instance declares its values,
//
//	c, err := client.New(nc, ..., client.WithDimensions(map[string]string{"env": "prod", "region": "eu"}))
//
// and Watch of the base path watches its variant. A value missing, or a
// combination that is not a variant, is an error wrapping ErrVariant, never
// a default or another variant (docs/VARIANTS.md).
//
// The client does not log: it reports applies, rejections, errors and
// warnings (EventNotFound) through WithEvents. It never creates JetStream consumers: it core-subscribes to the
// RePublished subjects and reads with direct gets (docs/PROTOCOL.md). It
// imports only the root package, nats.go (with what nats.go itself needs:
// nkeys, which it also uses for the signatures) and the standard library.
//
// Info lists what the instance runs of each config; client/prominfo exports
// it as the cuecast_config_info series from the service's own Prometheus
// registry, so a staged rollout's analysis can join the service's series to
// the version each instance runs (docs/ROLLOUT.md, "Analysis"). It lives
// apart so that the client does not depend on the Prometheus library.
//
// A Client and its Watchers are safe for concurrent use. Watch's context
// bounds the watcher's life. Watch returns errors wrapping
// cuecast.ErrInvalidPath for a bad config path; verification failures never
// surface as errors from Current, only as EventRejected events and as
// last_error in the instance's reports.
package client
