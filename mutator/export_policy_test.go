package mutator

// PathAllowed exposes pathAllowed to the black-box tests.
var PathAllowed = pathAllowed
