package secrets

// AppScope names the app's own secrets (e.g. the inference API key) in
// messages. They are stored apart from every agent's: an agent name can't
// start with ':', so no agent can ever be handed one of them.
const AppScope = ":app"

// InferenceKey is the app secret holding the API key of inferenceUrl.
const InferenceKey = "INFERENCE_API_KEY"

// SetApp stores an app-level secret.
func (s *Store) SetApp(key, value string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := checkValue(key, value); err != nil {
		return err
	}
	return s.wrap(s.B.Set(ServiceName(), entry(AppScope, key), value))
}

// GetApp returns an app-level secret, ErrNotFound when it is not set.
func (s *Store) GetApp(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", ErrNotFound
	}
	v, err := s.B.Get(ServiceName(), entry(AppScope, key))
	return v, s.wrap(err)
}

// RemoveApp deletes an app-level secret; an absent one is ErrNotFound.
func (s *Store) RemoveApp(key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return s.wrap(s.B.Delete(ServiceName(), entry(AppScope, key)))
}
