package cli

import (
	"context"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// NamespaceReadFrom is how many paths of a namespace make check --fleet
// read the namespace's reports once.
const NamespaceReadFrom = namespaceReadFrom

// FleetInstances is check --fleet's count of the live instances on paths.
func FleetInstances(ctx context.Context, d *distributor.Distributor, paths []cuecast.ConfigPath) (map[cuecast.ConfigPath][]string, error) {
	return (&liveFleet{d: d}).Instances(ctx, paths)
}
