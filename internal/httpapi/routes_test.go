package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/testenv"
)

// routes.go and api/openapi.yaml list the same routes: a route added to
// one and not the other fails here.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	m, err := newHTTPMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	err = chi.Walk(routes(Deps{}, m).(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+strings.TrimSuffix(route, "/"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range testenv.OpenAPIDoc(t).Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+strings.TrimSuffix(path, "/"))
		}
	}
	slices.Sort(served)
	slices.Sort(documented)
	if diff := cmp.Diff(documented, served); diff != "" {
		t.Errorf("routes (-openapi.yaml +routes.go):\n%s", diff)
	}
}

// Every problem type the code can produce is documented, and nothing else.
func TestProblemTypesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	var slugs []string
	for _, p := range problem.All() {
		slugs = append(slugs, p.Slug)
	}
	var documented []string
	for _, v := range testenv.OpenAPIDoc(t).Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		documented = append(documented, v.(string))
	}
	slices.Sort(slugs)
	slices.Sort(documented)
	if diff := cmp.Diff(documented, slugs); diff != "" {
		t.Errorf("problem types (-openapi.yaml +code):\n%s", diff)
	}
}
