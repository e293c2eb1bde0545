package tailer_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/tailer"
)

// A tailer wired the way `cuecast serve` wires it: the distributor publishes
// and deploys, a webhook wakes it, Run polls until the context ends.
func ExampleNew() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Error("connect", "err", err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	d, err := distributor.New(ctx, nc, distributor.Options{Logger: log})
	if err != nil {
		log.Error("distributor", "err", err)
		return
	}
	t, err := tailer.New(ctx, tailer.Config{Repo: "/src/configs", Branch: "main", Logger: log}, js, d, d)
	switch {
	case errors.Is(err, tailer.ErrNotRepo), errors.Is(err, tailer.ErrNoBranch):
		log.Error("fix --repo or --branch", "err", err) // exit status 2
		return
	case err != nil:
		log.Error("tailer", "err", err)
		return
	}
	http.Handle("/hooks/github", tailer.WebhookHandler(os.Getenv("GITHUB_WEBHOOK_SECRET"), t))
	if err := t.Run(ctx); err != nil {
		log.Error("tailer stopped", "err", err)
	}
}
