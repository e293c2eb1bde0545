package gitfs

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5"

	"github.com/cuecast/cuecast"
)

// Open opens the Git repository whose work tree (or bare directory) is
// dir, also when dir is a linked worktree (`git worktree add`), whose
// branches and objects are in the main repository's .git (go-git reads
// them only when told to follow the worktree's commondir). A directory
// that is no repository gives an error wrapping cuecast.ErrNotRepo.
func Open(dir string) (*git.Repository, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("open %s: %w", dir, cuecast.ErrNotRepo)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return r, nil
}
