//! The watermark of a task's input: the minimum over its channels (Flink's
//! `StatusWatermarkValve`). Each channel's watermark only rises; the input's watermark
//! rises when the slowest channel's does. Channels that ended or went idle hold nothing
//! back. A channel active again after idling counts only once its watermark caught up with
//! the input's (until then its records may be late, as in Flink). Once every channel
//! ended the watermark is [`Watermark::MAX`]; while every open channel is idle, so is the
//! input, and its consumers stop waiting for it.

use eddy_types::{Watermark, WatermarkStatus};

#[derive(Debug, Clone, Copy)]
struct Channel {
    watermark: Watermark,
    ended: bool,
    idle: bool,
    /// Counted in the minimum: active and caught up.
    aligned: bool,
}

/// What the input's consumers hear after a channel's watermark or status changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValveOutput {
    pub watermark: Option<Watermark>,
    pub status: Option<WatermarkStatus>,
}

/// Combines the watermarks of `n` channels.
#[derive(Debug)]
pub struct WatermarkValve {
    channels: Vec<Channel>,
    current: Watermark,
    status: WatermarkStatus,
}

impl WatermarkValve {
    pub fn new(channels: usize) -> Self {
        let channel = Channel { watermark: Watermark::MIN, ended: false, idle: false, aligned: true };
        Self { channels: vec![channel; channels], current: Watermark::MIN, status: WatermarkStatus::Active }
    }

    /// Channel `channel` reached `watermark`; the input's new watermark if it rose.
    pub fn on_watermark(&mut self, channel: usize, watermark: Watermark) -> Option<Watermark> {
        let state = &mut self.channels[channel];
        if watermark > state.watermark {
            state.watermark = watermark;
        }
        if !state.idle && state.watermark >= self.current {
            state.aligned = true;
        }
        self.advance()
    }

    /// The watermark channel `channel` has reached, unless it has none yet or ended (for
    /// an unaligned checkpoint's in-flight data, where the channel's replay starts).
    pub fn reached(&self, channel: usize) -> Option<Watermark> {
        let state = self.channels.get(channel)?;
        (!state.ended && state.watermark > Watermark::MIN).then_some(state.watermark)
    }

    /// Channel `channel` went idle or active again.
    pub fn on_status(&mut self, channel: usize, status: WatermarkStatus) -> ValveOutput {
        let state = &mut self.channels[channel];
        let mut output = ValveOutput::default();
        match status {
            WatermarkStatus::Idle => {
                state.idle = true;
                state.aligned = false;
                if self.all_idle() {
                    // The last active channel went idle: event time moves to the furthest
                    // any channel got, as Flink does, then the input is idle.
                    output.watermark = self.raise_to_max();
                } else {
                    output.watermark = self.advance();
                }
            }
            WatermarkStatus::Active => {
                state.idle = false;
                state.aligned = state.watermark >= self.current;
            }
        }
        output.status = self.status_change();
        output
    }

    /// Channel `channel` ended: the input's new watermark if it rose, and its new status
    /// if the channels still open are all idle.
    pub fn on_end_of_input(&mut self, channel: usize) -> ValveOutput {
        self.channels[channel].ended = true;
        let watermark = self.advance();
        ValveOutput { watermark, status: self.status_change() }
    }

    /// The input's status, if it changed: idle while every open channel is.
    fn status_change(&mut self) -> Option<WatermarkStatus> {
        let now = if self.all_idle() { WatermarkStatus::Idle } else { WatermarkStatus::Active };
        (now != self.status).then(|| {
            self.status = now;
            now
        })
    }

    fn all_idle(&self) -> bool {
        let mut open = self.channels.iter().filter(|c| !c.ended).peekable();
        open.peek().is_some() && open.all(|c| c.idle)
    }

    fn raise_to_max(&mut self) -> Option<Watermark> {
        let max = self.channels.iter().filter(|c| !c.ended).map(|c| c.watermark).max()?;
        (max > self.current).then(|| {
            self.current = max;
            max
        })
    }

    fn advance(&mut self) -> Option<Watermark> {
        if self.channels.iter().all(|c| c.ended) {
            return (Watermark::MAX > self.current).then(|| {
                self.current = Watermark::MAX;
                Watermark::MAX
            });
        }
        let minimum = self.channels.iter().filter(|c| !c.ended && c.aligned).map(|c| c.watermark).min()?;
        (minimum > self.current).then(|| {
            self.current = minimum;
            minimum
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_follows_its_slowest_open_channel() {
        let mut valve = WatermarkValve::new(2);
        assert_eq!(valve.on_watermark(0, Watermark(5)), None, "channel 1 is still at MIN");
        assert_eq!(valve.on_watermark(1, Watermark(3)), Some(Watermark(3)));
        assert_eq!(valve.on_watermark(1, Watermark(2)), None, "a channel's watermark never goes back");
        assert_eq!(valve.on_watermark(1, Watermark(9)), Some(Watermark(5)));
        assert_eq!(valve.on_end_of_input(0).watermark, Some(Watermark(9)), "an ended channel holds nothing back");
        assert_eq!(valve.on_end_of_input(1).watermark, Some(Watermark::MAX));
    }

    #[test]
    fn an_idle_channel_holds_nothing_back_until_it_is_active_and_caught_up() {
        let mut valve = WatermarkValve::new(2);
        assert_eq!(valve.on_watermark(0, Watermark(10)), None, "channel 1 holds it back");
        let idle = valve.on_status(1, WatermarkStatus::Idle);
        assert_eq!(idle, ValveOutput { watermark: Some(Watermark(10)), status: None });
        assert_eq!(valve.on_watermark(0, Watermark(20)), Some(Watermark(20)));
        assert_eq!(valve.on_status(1, WatermarkStatus::Active), ValveOutput::default());
        assert_eq!(valve.on_watermark(0, Watermark(30)), Some(Watermark(30)), "channel 1 is behind: not counted");
        assert_eq!(valve.on_watermark(1, Watermark(35)), None, "caught up: counted again");
        assert_eq!(valve.on_watermark(0, Watermark(40)), Some(Watermark(35)));
    }

    #[test]
    fn when_every_channel_is_idle_the_input_is_idle_at_the_furthest_watermark() {
        let mut valve = WatermarkValve::new(2);
        valve.on_watermark(0, Watermark(7));
        valve.on_watermark(1, Watermark(3));
        assert_eq!(valve.on_status(0, WatermarkStatus::Idle).status, None);
        let all = valve.on_status(1, WatermarkStatus::Idle);
        assert_eq!(all, ValveOutput { watermark: Some(Watermark(7)), status: Some(WatermarkStatus::Idle) });
        let back = valve.on_status(1, WatermarkStatus::Active);
        assert_eq!(back.status, Some(WatermarkStatus::Active));
    }

    #[test]
    fn the_input_is_idle_once_the_only_active_channel_ends() {
        let mut valve = WatermarkValve::new(2);
        valve.on_status(1, WatermarkStatus::Idle);
        let ended = valve.on_end_of_input(0);
        assert_eq!(ended.status, Some(WatermarkStatus::Idle), "the channel left open is idle");
    }
}
