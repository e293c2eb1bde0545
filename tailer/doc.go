// Package tailer turns the commits of a Git branch into config versions.
//
// A Tailer follows one branch of one repository (a local path, or a remote
// URL it clones into its data directory and fetches from). For each new
// first-parent commit, oldest first, it diffs the commit's tree against the
// last commit that compiled, maps the changed files through the compiler's
// dependency index to the configs they affect, compiles only those straight
// from the Git objects (gitfs; no checkout), and publishes a new
// version of each config whose output changed (a tombstone for one that was
// deleted), attributed to the commit: hash, first parent, author, time and
// message. Then it deploys the newest version of each. A config that varies
// along dimensions is published as one version stream per variant path
// (payments/checkout/env=prod) plus its variant index at its own path; a
// variant it no longer has gets a tombstone (docs/VARIANTS.md).
//
//	js, _ := jetstream.New(nc)
//	d, _ := distributor.New(ctx, nc, distributor.Options{})
//	t, err := tailer.New(ctx, tailer.Config{Repo: "/src/configs", Logger: log}, js, d, d)
//	if errors.Is(err, tailer.ErrNotRepo) || errors.Is(err, tailer.ErrNoBranch) {
//		// a usage error: the message names the path or the branch
//	}
//	http.Handle("/hooks/github", tailer.WebhookHandler(secret, t))
//	err = t.Run(ctx) // polls every Interval, and at once on Wake, until ctx is done
//
// # Exactly once
//
// The cursor (the last commit processed) and the list of rejected commits
// live in the JetStream KV bucket "cuecast-tailer" under "cursor.<ID>",
// written by compare-and-swap. Version numbers are never kept in memory:
// each comes from Publisher.Latest plus one and Publish is create-only, so a
// crash between publishing a commit's versions and moving the cursor is
// repaired on restart by finding those versions (same commit) and publishing
// only the ones still missing. A crash test kills the process at random
// points and checks every config has versions 1..N, each from the right
// commit.
//
// # Backlogs
//
// A poll processes every commit after the cursor as one batch, in a
// two-stage pipeline (compile commit k+1 while commit k publishes). Runs of
// consecutive commits whose affected configs are disjoint are compiled
// together, from the last commit's tree, each version still attributed to the
// commit that changed it (checked against the dependency index before and
// after the compile; anything doubtful goes commit by commit). Every version
// is published, but only each config's newest is deployed, when the batch
// ends (every 5 minutes in a long one): the configs still to deploy are saved with
// the cursor in State.Undeployed, so a crash cannot lose a deploy.
//
// # Commits that do not compile
//
// They are logged and recorded in State.Rejected with the compiler's
// errors; the cursor moves past them but State.Base stays at the last good
// commit, and the next commit is diffed against Base, so what the rejected
// commits changed is compiled (against the new commit's own tree) as soon
// as the branch compiles again. A commit is published per namespace: when
// every error belongs to a config, the configs of the other namespaces are
// published from it (Rejected.Namespaces names the rejected ones), so one
// team's broken config does not hold every team's changes; an error that
// belongs to no config (the manifest, the module) rejects it whole. Each version that commit publishes
// names, in Carries, the rejected commits that changed what its config
// depends on, so their authors are credited and not only the fixer's.
//
// # History rewrites
//
// When the branch tip does not descend from the cursor (a force push), Poll
// returns a *RewriteError (errors.Is ErrRewrite) naming both commits, logs it
// once, records it in State.Rewrite and publishes nothing until an operator
// calls AcceptRewrite with the commit to resume from (`cuecast tailer
// accept-rewrite --to SHA`), from any process, or the old history is pushed
// back: a poll that finds the cursor on the branch again clears the halt and
// carries on after the cursor.
//
// # Version numbers
//
// A number is never published twice with different content. Besides the
// stream, the highest number of each config is kept in the data directory
// (Config.DataDir, reserved and fsynced before each publish), in State.HighWater
// (after it) and, through DeployedVersions, in the rollout records. The first
// poll of a process compares the stream with them; a stream behind them makes
// Poll return an *InconsistentError (ErrInconsistent) and publish nothing
// until Repair rebuilds the damaged configs above every number taken.
//
// # Concurrency
//
// A Tailer's methods are safe for concurrent use; polls never overlap. Run
// owns its polling loop and returns when its ctx is cancelled; Poll and
// AcceptRewrite stop between two steps when theirs is. Two Tailers with one
// ID over one NATS store would contend for one cursor: the loser's writes
// fail and it re-reads the state on its next poll.
package tailer
