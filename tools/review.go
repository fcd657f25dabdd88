package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// MaxReviewSummary bounds sandbox_request_review's summary, in characters.
const MaxReviewSummary = 4000

// Reviewer tells the user an agent asks for review of its changes to a
// project (the owner records an event the window and `osaurus-sandbox
// events` show). It returns how many changes await review and the id of
// the review the host recorded of them.
type Reviewer interface {
	RequestReview(ctx context.Context, a agents.Agent, project, summary string) (changes int, review string, err error)
}

type reviewArgs struct {
	Project string `json:"project"`
	Summary string `json:"summary"`
}

func init() {
	catalog = append(catalog, &tool{
		Spec: Spec{
			Name: "sandbox_request_review",
			Description: "Ask the user to review what you changed in a project (/workspace/projects/<project>): your changes " +
				"stay in your own view until the user applies them to their folder. Returns {project, changes, review, review_command}.",
			InputSchema: object(
				str("project", "The project's name, the folder under /workspace/projects.").must(),
				str("summary", "What you changed and why, for the user (at most 4000 characters).").must(),
			),
		},
		gate: gateReview, service: serviceWrite, bind: bind(requestReview),
	})
}

func requestReview(ctx context.Context, c *call, a reviewArgs) (any, error) {
	if !slices.Contains(c.agent.Projects, a.Project) {
		want := "none: the user has granted you no project"
		if len(c.agent.Projects) > 0 {
			want = "one of " + strings.Join(c.agent.Projects, ", ")
		}
		return nil, envelope.ArgErrorf("project", want, "%q is not a project you were granted", a.Project)
	}
	if strings.TrimSpace(a.Summary) == "" {
		return nil, envelope.ArgErrorf("summary", "a few sentences on what changed", "argument `summary` is empty")
	}
	if n := utf8.RuneCountInString(a.Summary); n > MaxReviewSummary {
		return nil, envelope.ArgErrorf("summary", fmt.Sprintf("at most %d characters", MaxReviewSummary),
			"argument `summary` has %d characters", n)
	}
	for _, r := range a.Summary {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			return nil, envelope.ArgErrorf("summary", "plain text", "argument `summary` holds the control character %U", r)
		}
	}
	if err := c.env.rate.Allow(c.agent.ID, serviceWrite); err != nil {
		return nil, err
	}
	n, id, err := c.env.reviewer.RequestReview(ctx, c.agent, a.Project, a.Summary)
	if err != nil {
		return nil, err
	}
	return map[string]any{"project": a.Project, "changes": n, "review": id,
		"review_command": fmt.Sprintf("osaurus-sandbox changes %s %s", c.agent.Slug, a.Project)}, nil
}
