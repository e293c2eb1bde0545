package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/iostreams"
)

// NamespaceReadFrom is how many paths of a namespace make check --fleet
// read the namespace's reports once.
const NamespaceReadFrom = namespaceReadFrom

// FleetInstances is check --fleet's count of the live instances on paths.
func FleetInstances(ctx context.Context, d *distributor.Distributor, paths []cuecast.ConfigPath) (map[cuecast.ConfigPath][]string, error) {
	return (&liveFleet{d: d}).Instances(ctx, paths)
}

// MainWithRewatchPause is Main with pause in place of the wait before each
// re-watch of watch and agent (rewatchPause), so a test counts re-watches
// and their delays without a clock.
func MainWithRewatchPause(ctx context.Context, args []string, io *iostreams.IOStreams, pause func(context.Context, time.Duration) error) int {
	return run(ctx, &Env{IO: io, Getenv: func(string) string { return "" }, rewatchPause: pause}, args)
}

// CommandTree is every command, the root first and each before its
// subcommands, built with no environment.
func CommandTree() []*cobra.Command {
	io, _, _ := iostreams.Test()
	var tree []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		tree = append(tree, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCmd(&Env{IO: io, Getenv: func(string) string { return "" }}))
	return tree
}
