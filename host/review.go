package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/store/events"
)

// ReviewEvent is the event type sandbox_request_review records.
const ReviewEvent = "project.review_requested"

// Reviewer records an agent's requests for review in the event log, which
// the window and `osaurus-sandbox events` show the user
// (tools.Reviewer).
type Reviewer struct {
	Paths   config.Paths
	Events  *events.Store // nil: requests fail, saying so
	Secrets *secrets.Store
	Logf    func(string, ...any)
}

// RequestReview counts the agent's changes, records them as a review (the
// id is in the event: the user applies exactly what the host saw) and
// records the request with its summary, scrubbed of the agent's secrets like the rest of its output.
func (r Reviewer) RequestReview(ctx context.Context, a agents.Agent, project, summary string) (int, string, error) {
	if r.Events == nil {
		return 0, "", errors.New("the event log is unavailable, so the user can't be notified; tell them in your reply instead")
	}
	p, err := projects.Get(r.Paths.ProjectsJSON(), project)
	if err != nil {
		return 0, "", err
	}
	cs, err := projects.Views{Paths: r.Paths}.Changes(ctx, a, p)
	if err != nil {
		return 0, "", err
	}
	if r.Secrets != nil {
		summary = r.Secrets.Scrub(a.Slug, summary)
	}
	payload, err := json.Marshal(map[string]any{
		"project": project, "summary": summary, "changes": len(cs.Changes), "review_id": cs.Review,
		"review": fmt.Sprintf("osaurus-sandbox changes %s %s", a.Slug, project),
	})
	if err != nil {
		return 0, "", err
	}
	if _, err := r.Events.Emit(ctx, a.Slug, ReviewEvent, payload); err != nil {
		return 0, "", err
	}
	if r.Logf != nil {
		r.Logf("%s asks for review of %d changes to project %s", a.Name, len(cs.Changes), project)
	}
	return len(cs.Changes), cs.Review, nil
}
