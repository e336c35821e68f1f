//! The watermark of a task's input: the minimum over its channels (Flink's
//! `StatusWatermarkValve`). Each channel's watermark only rises; the input's watermark
//! rises when the slowest open channel's does. A channel that ended no longer holds it
//! back, and once every channel ended the input's watermark is [`Watermark::MAX`].

use eddy_types::Watermark;

/// Combines the watermarks of `n` channels.
#[derive(Debug)]
pub struct WatermarkValve {
    channels: Vec<Watermark>,
    ended: Vec<bool>,
    current: Watermark,
}

impl WatermarkValve {
    pub fn new(channels: usize) -> Self {
        Self { channels: vec![Watermark::MIN; channels], ended: vec![false; channels], current: Watermark::MIN }
    }

    /// Channel `channel` reached `watermark`; the input's new watermark if it rose.
    pub fn on_watermark(&mut self, channel: usize, watermark: Watermark) -> Option<Watermark> {
        if watermark > self.channels[channel] {
            self.channels[channel] = watermark;
        }
        self.advance()
    }

    /// Channel `channel` ended; the input's new watermark if it rose.
    pub fn on_end_of_input(&mut self, channel: usize) -> Option<Watermark> {
        self.ended[channel] = true;
        self.advance()
    }

    fn advance(&mut self) -> Option<Watermark> {
        let open = self.channels.iter().zip(&self.ended).filter(|(_, ended)| !**ended);
        let minimum = open.map(|(w, _)| *w).min().unwrap_or(Watermark::MAX);
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
        assert_eq!(valve.on_end_of_input(0), Some(Watermark(9)), "an ended channel holds nothing back");
        assert_eq!(valve.on_end_of_input(1), Some(Watermark::MAX));
    }
}
