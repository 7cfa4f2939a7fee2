// The timers every JavaScript runtime the SDK targets has (the
// mini-program's, Node's, browsers'); declared here so that the library
// compiles against the ECMAScript library alone, without DOM or Node types.
declare function setTimeout(callback: () => void, ms: number): unknown;
declare function clearTimeout(id: unknown): void;
