package lab

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// PGBinDir finds the PostgreSQL server programs (initdb, pg_ctl,
// pgbench) for a tool that runs its own cluster or pgbench: given when
// set, else the newest /usr/lib/postgresql/*/bin
// holding initdb, else the directory of an initdb on PATH.
func PGBinDir(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server programs (initdb, pg_ctl, pgbench) found: run `make services` (it installs them) or name their directory")
}
