// Package board serves the merchant order board: a static page (HTML, CSS
// and one small script, embedded in the binary, no build step) on which
// staff log in, see today's orders by status (pickup and scheduled orders
// in columns of their own), hear a new paid order arrive over the live
// order stream, and accept, reject, ready, dispatch, hand over and
// complete with one tap each. It speaks Simplified Chinese, or English
// by choice; its words are all in static/strings.json.
package board

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

//go:embed static
var static embed.FS

// Handler serves the board under /board/.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic("board: embedded files: " + err.Error()) // the embed directive makes it exist
	}
	fileServer := http.StripPrefix("/board/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/board/")
		if name == "" {
			name = "index.html"
		}
		if _, err := fs.Stat(files, name); err != nil {
			web.Error(w, r, problem.New(problem.NotFound, "the board has no file %q", name))
			return
		}
		h := w.Header()
		// Only our own script, styles and API; never framed.
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Revalidate each time: a new release's page and script go together.
		h.Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}
