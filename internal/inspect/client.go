package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Client reads the state API of a running proxy.
type Client struct {
	// Address is the proxy's metrics address, host:port.
	Address string
	// HTTP defaults to http.DefaultClient.
	HTTP *http.Client
}

// Get fetches the document at path (below PathPrefix, with query) into v. An
// error response's message becomes the error.
func (c *Client) Get(ctx context.Context, path string, query url.Values, v any) error {
	u := url.URL{Scheme: "http", Host: c.Address, Path: PathPrefix + path, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("reading the proxy's state (is kproxy serving metrics on %s? see --address): %w", c.Address, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading %s: %w", u.String(), err)
	}
	if resp.StatusCode != http.StatusOK {
		var st Status
		if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
			return fmt.Errorf("%s", st.Message)
		}
		return fmt.Errorf("%s: %s (is the proxy at %s kproxy?)", u.String(), resp.Status, c.Address)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decoding %s: %w", u.String(), err)
	}
	return nil
}
