// Package simfleet runs simulated service instances for benchmarks in a
// child process: the test binary re-executed, because one process here can
// hold about 20,000 open files and every instance, with its own NATS
// connection, needs one on each side. The benchmark (the parent) starts the
// child with Start; the test binary's TestMain sees ChildEnv set and calls
// Run instead of the tests:
//
//	func TestMain(m *testing.M) {
//		if os.Getenv(simfleet.ChildEnv) == "mybench" {
//			os.Exit(benchChild()) // which calls simfleet.Run
//		}
//		os.Exit(m.Run())
//	}
//
// The two talk in lines over the child's stdin and stdout:
//
//	child:  ready HEAP RSS    every instance has applied a version; the child's heap and resident set per instance, in bytes
//	parent: arm KIND V        a round: wait for every instance to reach V in the way KIND names
//	child:  armed
//	child:  done T0,T1,…      when each instance reached it, unix nanoseconds
//
// The end of the child's stdin stops it. A round of kind Applied is reached
// by an instance's EventApplied of version V; a benchmark's own kinds are
// reached through the hooks in Options.
package simfleet
