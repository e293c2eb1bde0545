// Package ci is the pull-request check: it compiles the configs a change
// affects at two revisions of a config repo, straight from Git objects, and
// reports what the change does to their compiled output, with a risk summary
// on top; and it reports that to GitHub as a check run and a PR comment.
//
//	rep, err := ci.Check(ctx, "path/to/configs", ci.Options{Base: "main", Head: "HEAD"})
//	if err != nil {
//		return err // not a repo, an unknown revision, I/O: the check could not run
//	}
//	rep.WriteText(os.Stdout)
//	if rep.Failed() {
//		// the change leaves a config invalid that the base had valid
//	}
//
// Check plans the base revision in full (every file read and indexed,
// nothing evaluated: its dependency index decides which configs the changed
// files reach) and compiles only those configs, at both revisions (the
// base's errors tell pre-existing errors from new ones). It reads the
// repository through go-git (package gitfs) and never touches the work
// tree, so it is safe to run on any clone, including a bare one.
//
// A Report renders as text (WriteText), JSON (WriteJSON) and GitHub Markdown
// (Markdown, cut to fit GitHub's body limit without breaking a code block).
//
// GitHub reports through go-github: NewGitHub, then Start (a check run,
// in_progress), CheckRun.Complete (annotations in batches of 50, the verdict)
// and Comment (one comment per PR, found again by Marker). Requests are
// retried on 5xx answers and rate limits, except that a create (POST) that
// may have succeeded is looked up before it is sent again; mutating
// requests are spaced GitHubOptions.MutationInterval apart. A refusal comes
// back as a *PermissionError naming the workflow permission to grant.
//
// The package keeps no global state; a Check or a GitHub may be used from
// one goroutine at a time.
package ci
