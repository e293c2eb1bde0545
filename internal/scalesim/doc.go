// Package scalesim runs a fan-out tree across processes, as far as one
// machine allows: a hub server and N node servers, each in its own process
// (the test binary re-executed, running the nats-server code from the
// configuration `cuecast nats-config` generates), and the simulated
// instances in child processes (internal/simfleet), spread evenly over the
// nodes, each instance with its own connection to its node as the
// namespace's service user, reading the node's CUECAST_<ns> mirror.
//
// The parent, the test, is the top: it runs the distributor against the hub
// and makes one change at a time (Publish and Deploy of a 2.2 KB version to
// every cohort pointer), and, in the same run, the core-NATS floor: one
// message of the same size published at the hub that every instance's
// connection receives through the same leafnode links. Per change it
// measures apply-all p50/p99 (overall and per node), each server's CPU
// time (its own getrusage: /proc/<pid>/stat counts 10 ms ticks) and
// resident set (/proc/<pid>/status), its instances' children's CPU and
// resident set (/proc), and each server's message counts (varz, leafz), so
// that the hub's cost per change can be compared across fleet sizes with
// the same number of nodes (docs/SCALING.md, BENCHMARKS.md "Scale").
//
// The test binary's TestMain dispatches the roles:
//
//	func TestMain(m *testing.M) {
//		if code, ok := scalesim.Child(); ok {
//			os.Exit(code)
//		}
//		os.Exit(m.Run())
//	}
//
// A server child talks in lines over its stdin and stdout:
//
//	child:  ready URL      accepting clients at URL
//	parent: stats
//	child:  stats JSON     its Counters
//
// The end of its stdin shuts the server down.
//
// TestScaleModesSoak runs the two report modes side by side on a hub and
// regional servers (Options.Regions, Options.Summaries): a summarizer per
// region in its own process (distributor.Summarizer, logged in as
// summarizerLogin says) and report generators instead of a client per
// instance (GrowReporters; modes.go says what is real), measuring the
// hub's intake, CPU and resident set at rest and per change, and the time
// from a commit to the hub's view, as `status --wait` reads it, having
// every instance on the version (docs/SCALING.md, "Calibration"). Those
// children talk as a server does: "ready", then run until stdin ends.
package scalesim
