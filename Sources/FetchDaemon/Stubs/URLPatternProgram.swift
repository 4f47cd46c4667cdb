/// A `URLPattern` compiled to an automaton (Thompson's construction), and its matcher: one
/// pass over the text that keeps the list of states the automaton may be in, each state at
/// most once per position, so a byte costs at most one step per state and nothing is ever
/// tried again. A search anywhere in the text starts the automaton afresh at every position
/// within the same pass.
struct URLPatternProgram: Sendable {
    enum Op: UInt8, Sendable {
        /// Consumes the byte `x`, or a byte of `sets[x]`.
        case byte, set
        /// Goes on at `x` and at `y` (no byte consumed).
        case split
        case jump
        /// Goes on only at the start, or only at the end, of the text.
        case begin, end
        case match
    }

    struct Instruction: Sendable {
        var op: Op
        var x: Int32 = 0
        var y: Int32 = 0
    }

    private(set) var instructions: [Instruction] = []
    private(set) var sets: [ByteSet] = []

    init(_ tree: URLPatternParser.Node) {
        emit(tree)
        instructions.append(Instruction(op: .match))
    }

    /// How many instructions `tree` compiles to (the match at the end left out); saturates far
    /// above any bound, so `(a{1000}){1000}` is counted without being built.
    static func size(of tree: URLPatternParser.Node) -> Int {
        let cap = 1 << 40
        func times(_ a: Int, _ b: Int) -> Int { a == 0 || b == 0 ? 0 : (a > cap / b ? cap : a * b) }
        switch tree {
        case .bytes, .begin, .end: return 1
        case .empty: return 0
        case .sequence(let items): return min(cap, items.reduce(0) { $0 + size(of: $1) })
        case .either(let branches): return min(cap, branches.reduce(0) { $0 + size(of: $1) } + 2 * (branches.count - 1))
        case .repeated(let item, let least, let most):
            let one = size(of: item)
            guard let most else { return least == 0 ? min(cap, one + 2) : min(cap, times(least, one) + 1) }
            return min(cap, times(least, one) + times(most - least, one + 1))
        }
    }

    private var here: Int32 { Int32(instructions.count) }

    private mutating func emit(_ tree: URLPatternParser.Node) {
        switch tree {
        case .bytes(let set):
            if let byte = set.single {
                instructions.append(Instruction(op: .byte, x: Int32(byte)))
            } else {
                instructions.append(Instruction(op: .set, x: Int32(sets.count)))
                sets.append(set)
            }
        case .begin: instructions.append(Instruction(op: .begin))
        case .end: instructions.append(Instruction(op: .end))
        case .empty: break
        case .sequence(let items): items.forEach { emit($0) }
        case .either(let branches):
            // split(first, next split) ... each branch jumps past the last one.
            var jumps: [Int] = []
            for (number, branch) in branches.enumerated() {
                let split = instructions.count
                if number < branches.count - 1 { instructions.append(Instruction(op: .split)) }
                emit(branch)
                if number < branches.count - 1 {
                    jumps.append(instructions.count)
                    instructions.append(Instruction(op: .jump))
                    instructions[split].x = Int32(split + 1)
                    instructions[split].y = here
                }
            }
            for jump in jumps { instructions[jump].x = here }
        case .repeated(let item, let least, let most):
            guard let most else {
                if least == 0 {
                    // loop: split(body, out); body; jump loop
                    let loop = instructions.count
                    instructions.append(Instruction(op: .split, x: Int32(loop + 1)))
                    emit(item)
                    instructions.append(Instruction(op: .jump, x: Int32(loop)))
                    instructions[loop].y = here
                } else {
                    for _ in 0..<(least - 1) { emit(item) }
                    // body; split(body, out)
                    let body = here
                    emit(item)
                    instructions.append(Instruction(op: .split, x: body, y: here + 1))
                }
                return
            }
            for _ in 0..<least { emit(item) }
            for _ in least..<most {
                // split(body, out); body
                let split = instructions.count
                instructions.append(Instruction(op: .split, x: Int32(split + 1)))
                emit(item)
                instructions[split].y = here
            }
        }
    }

    /// The two lists of states a run keeps, its marks and its stack: what a match holds,
    /// whatever the text (a few words per state). One run at a time uses it.
    final class Lists: @unchecked Sendable {
        private let size: Int
        private var current: UnsafeMutablePointer<Int32>
        private var next: UnsafeMutablePointer<Int32>
        private var currentCount = 0
        /// `marks[state] == stamp`: the state is already on the list of that position.
        private let marks: UnsafeMutablePointer<Int>
        /// The states still to follow without a byte: each state pushes at most two, once.
        private let stack: UnsafeMutablePointer<Int32>
        /// One allocation for all four.
        private let block: UnsafeMutableRawPointer

        init(size: Int) {
            self.size = size
            // marks (words) first, then current, next and the stack (Int32s).
            block = .allocate(byteCount: size * MemoryLayout<Int>.stride + (4 * size + 2) * MemoryLayout<Int32>.stride,
                              alignment: MemoryLayout<Int>.alignment)
            marks = block.bindMemory(to: Int.self, capacity: size)
            marks.initialize(repeating: 0, count: size)
            let states = (block + size * MemoryLayout<Int>.stride).bindMemory(to: Int32.self, capacity: 4 * size + 2)
            current = states
            next = states + size
            stack = states + 2 * size
        }

        deinit {
            block.deallocate()
        }

        /// Goes on from `position` (its states are on `current`) until the text is decided,
        /// or `budget` (steps) runs out: then nil, and `position` and the lists say where to
        /// resume.
        func run(_ program: URLPatternProgram, _ text: UnsafeBufferPointer<UInt8>, from position: inout Int,
                 budget: inout Int) -> Bool? {
            program.instructions.withUnsafeBufferPointer { instructions in
                program.sets.withUnsafeBufferPointer { sets in
                    run(instructions, sets, text, from: &position, budget: &budget)
                }
            }
        }

        private func run(_ instructions: UnsafeBufferPointer<Instruction>, _ sets: UnsafeBufferPointer<ByteSet>,
                         _ text: UnsafeBufferPointer<UInt8>, from position: inout Int, budget: inout Int) -> Bool? {
            precondition(instructions.count == size)
            while true {
                if budget <= 0 { return nil }
                // A match may start here.
                if add(0, at: position, to: current, &currentCount, instructions, length: text.count) { return true }
                if position == text.count { return false }
                budget -= currentCount + 1
                let byte = text[position]
                var nextCount = 0
                for slot in 0..<currentCount {
                    let state = current[slot]
                    let instruction = instructions[Int(state)]
                    let taken = instruction.op == .byte ? instruction.x == Int32(byte) : sets[Int(instruction.x)].contains(byte)
                    if taken, add(state + 1, at: position + 1, to: next, &nextCount, instructions, length: text.count) { return true }
                }
                swap(&current, &next)
                currentCount = nextCount
                position += 1
            }
        }

        /// Puts `state`, and every state reached from it without a byte, on `list` for
        /// `position` (each once); true when that reaches the match.
        private func add(_ state: Int32, at position: Int, to list: UnsafeMutablePointer<Int32>, _ count: inout Int,
                         _ instructions: UnsafeBufferPointer<Instruction>, length: Int) -> Bool {
            let stamp = position + 1
            var depth = 1
            stack[0] = state
            while depth > 0 {
                depth -= 1
                let state = stack[depth]
                let index = Int(state)
                if marks[index] == stamp { continue }
                marks[index] = stamp
                let instruction = instructions[index]
                switch instruction.op {
                case .byte, .set:
                    list[count] = state
                    count += 1
                case .split:
                    stack[depth] = instruction.y
                    stack[depth + 1] = instruction.x
                    depth += 2
                case .jump:
                    stack[depth] = instruction.x
                    depth += 1
                case .begin, .end:
                    if instruction.op == .begin ? position == 0 : position == length {
                        stack[depth] = state + 1
                        depth += 1
                    }
                case .match:
                    return true
                }
            }
            return false
        }
    }
}
