package ci

import _ "embed"

// Workflow is the GitHub Actions workflow that runs `cuecast check` on pull
// requests (cuecast-check.yml beside this file): what `cuecast init` puts in
// a new config repo's .github/workflows/.
//
//go:embed cuecast-check.yml
var Workflow []byte
