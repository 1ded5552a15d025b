import PushgateModel
import Testing

@Suite("Push types")
struct PushTypeTests {
    @Test("only background pushes are silent")
    func pushClass() {
        for type in PushType.allCases {
            #expect(type.pushClass == (type == .background ? .silent : .regular), "\(type)")
        }
    }

    @Test("voip payloads may be larger; every type that needs a topic suffix names it")
    func limitsAndSuffixes() {
        #expect(PushType.voip.maxPayloadBytes == 5120)
        #expect(PushType.alert.maxPayloadBytes == 4096)
        #expect(PushType.allCases.filter { $0.topicSuffix == nil } == [.alert, .background, .mdm])
    }

    @Test("priorities order low < normal < high")
    func priorities() {
        #expect(PushPriority.low < .normal && PushPriority.normal < .high)
        #expect(PushPriority(rawValue: 7) == nil)
    }
}
