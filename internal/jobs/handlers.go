package jobs

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// DeadJob is a discarded job as operators see it.
type DeadJob struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Errors      []JobError      `json:"errors"`
	CreatedAt   time.Time       `json:"created_at"`
	DiscardedAt *time.Time      `json:"discarded_at"`
}

// JobError is one failed attempt.
type JobError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

func deadJob(j *rivertype.JobRow) DeadJob {
	d := DeadJob{
		ID: strconv.FormatInt(j.ID, 10), Kind: j.Kind, Args: json.RawMessage(j.EncodedArgs),
		Attempts: j.Attempt, MaxAttempts: j.MaxAttempts, CreatedAt: j.CreatedAt.UTC(), DiscardedAt: j.FinalizedAt,
		Errors: make([]JobError, len(j.Errors)),
	}
	for i, e := range j.Errors {
		d.Errors[i] = JobError{Attempt: e.Attempt, At: e.At.UTC(), Error: e.Error}
	}
	return d
}

// DeadList is a page of dead jobs.
type DeadList struct {
	Jobs       []DeadJob `json:"jobs"`
	NextCursor *string   `json:"next_cursor"`
}

// HandleDead serves GET /admin/v1/jobs/dead?cursor=&limit=: discarded
// jobs, newest first.
func HandleDead(c *Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := web.Query(r, "cursor", "limit")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		limit := 50
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 200 {
				web.Error(w, r, problem.Field("limit", "must be between 1 and 200"))
				return
			}
			limit = n
		}
		params := river.NewJobListParams().States(rivertype.JobStateDiscarded).OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(limit)
		if cur := q.Get("cursor"); cur != "" {
			var jc river.JobListCursor
			if err := jc.UnmarshalText([]byte(cur)); err != nil {
				web.Error(w, r, problem.Field("cursor", "not a cursor this API returned"))
				return
			}
			params = params.After(&jc)
		}
		res, err := c.JobList(r.Context(), params)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		out := DeadList{Jobs: make([]DeadJob, len(res.Jobs))}
		for i, j := range res.Jobs {
			out.Jobs[i] = deadJob(j)
		}
		if len(res.Jobs) == limit && res.LastCursor != nil {
			b, err := res.LastCursor.MarshalText()
			if err == nil {
				s := string(b)
				out.NextCursor = &s
			}
		}
		web.JSON(w, http.StatusOK, out)
	})
}

// HandleRetry serves POST /admin/v1/jobs/{id}/retry: the job runs again
// as soon as possible, with its attempts reset by River.
func HandleRetry(c *Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			web.Error(w, r, problem.New(problem.NotFound, "no such job"))
			return
		}
		j, err := c.JobRetry(r.Context(), id)
		if errors.Is(err, river.ErrNotFound) {
			web.Error(w, r, problem.New(problem.NotFound, "no such job"))
			return
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, deadJob(j))
	})
}
