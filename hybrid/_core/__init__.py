"""The imperative core: contexts and their modes, the lazy tape that records a step, blocks' cached
forwards, compiled steps, and the reports over them. Nothing here is public: users reach it
through ``hybrid``'s public modules."""
