package web

import (
	"net/http"
	"strconv"
)

// PathID parses the {id} path parameter; an id that cannot exist (not a
// positive 64-bit integer) is notFound, the resource's own problem.
func PathID(r *http.Request, notFound error) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, notFound
	}
	return id, nil
}
