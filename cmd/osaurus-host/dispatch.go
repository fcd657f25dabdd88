package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
)

const dispatchForm = "agent dispatch ID TASK [--wait]"

func parseDispatch(a []string) (request, error) {
	wait := false
	var pos []string
	for _, x := range a {
		if x == "--wait" {
			wait = true
			continue
		}
		pos = append(pos, x)
	}
	if len(pos) != 2 {
		return request{}, errors.New("expected: osaurus-host " + dispatchForm)
	}
	req := request{method: "POST", path: "/api/agent/dispatch", body: map[string]string{"agent_id": pos[0], "task": pos[1]}, show: printField("task_id")}
	if wait {
		req.show = quiet
		req.then = waitTask
	}
	return req, nil
}

// waitTask polls the dispatched task until it ends (each poll waits on
// the host) and prints its answer.
func waitTask(sock string, resp map[string]any, stdout, stderr io.Writer) int {
	id, _ := resp["task_id"].(string)
	if id == "" {
		fmt.Fprintln(stderr, "osaurus-host: the bridge answered without a task_id")
		return exitFailed
	}
	fmt.Fprintf(stderr, "task %s dispatched; waiting for it to finish\n", id)
	for {
		status, header, body, err := do(sock, request{method: "GET", path: "/api/agent/tasks/" + url.PathEscape(id) + "?wait=60"})
		if err != nil {
			fmt.Fprintf(stderr, "osaurus-host: cannot reach the host bridge at %s: %v\n", sock, err)
			return exitNoBridge
		}
		if status >= 300 {
			return failed(status, header, body, stderr)
		}
		var t struct {
			State  string `json:"state"`
			Answer string `json:"answer"`
			Error  string `json:"error"`
			Steps  int    `json:"steps"`
		}
		if err := json.Unmarshal(body, &t); err != nil {
			fmt.Fprintf(stderr, "osaurus-host: bad task answer: %v\n", err)
			return exitFailed
		}
		switch t.State {
		case "running":
			continue
		case "done":
			fmt.Fprintln(stdout, t.Answer)
			return exitOK
		default:
			fmt.Fprintf(stderr, "osaurus-host: task %s %s after %d steps: %s\n", id, t.State, t.Steps, t.Error)
			return exitFailed
		}
	}
}
